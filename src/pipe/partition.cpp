#include "pipe/partition.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <regex>

#include "core/error.h"

namespace ds::pipe {

std::vector<int32_t> partition_uniform(int32_t num_items, int32_t num_parts) {
    std::vector<int32_t> parts(static_cast<size_t>(num_parts) + 1, 0);
    if (num_items <= num_parts) {
        for (int32_t p = 0; p <= num_parts; ++p) parts[p] = std::min(p, num_items);
        return parts;
    }
    const int32_t chunk = num_items / num_parts, residual = num_items - chunk * num_parts;
    // Stage p starts after p chunks plus one extra item for each of the first
    // `residual` stages before it.
    for (int32_t p = 0; p <= num_parts; ++p) parts[p] = p * chunk + std::min(p, residual);
    return parts;
}

std::vector<int32_t> partition_balanced(const std::vector<double>& weights, int32_t num_parts) {
    const size_t n = weights.size(), m = static_cast<size_t>(num_parts);
    if (n <= m) return partition_uniform(static_cast<int32_t>(n), num_parts);
    const double inf = std::numeric_limits<double>::infinity();
    // Tables [i][j]: the best split of the first i items into j parts, its
    // largest and smallest part sums, and where its last part starts.
    std::vector<double> dp_max((n + 1) * (m + 1), inf), dp_min((n + 1) * (m + 1), inf),
        dp_cost((n + 1) * (m + 1), inf);
    std::vector<size_t> position((n + 1) * (m + 1), 0);
    auto at = [m](size_t i, size_t j) { return i * (m + 1) + j; };
    std::vector<double> prefix(n + 1, 0.0);
    for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[i];
    dp_max[at(0, 0)] = 0.0;
    dp_cost[at(0, 0)] = 0.0;  // dp_min[0][0] stays +inf, as in DeepSpeed
    for (size_t i = 1; i <= n; ++i)
        for (size_t j = 1; j <= std::min(i, m); ++j)
            for (size_t k = 0; k < i; ++k) {
                const double part = prefix[i] - prefix[k];
                const double mx = std::max(dp_max[at(k, j - 1)], part);
                const double mn = std::min(dp_min[at(k, j - 1)], part);
                const double cost = mx - mn;
                if (dp_cost[at(i, j)] >= cost) {  // >=: a later k wins a tie
                    dp_cost[at(i, j)] = cost;
                    dp_max[at(i, j)] = mx;
                    dp_min[at(i, j)] = mn;
                    position[at(i, j)] = k;
                }
            }
    std::vector<int32_t> parts(m + 1);
    size_t end = n;
    parts[m] = static_cast<int32_t>(n);
    for (size_t j = m; j >= 1; --j) {
        end = position[at(end, j)];
        parts[j - 1] = static_cast<int32_t>(end);
    }
    return parts;
}

namespace {

std::string lowered(const std::string& s) {
    std::string out = s;
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::vector<double> type_weights(const std::string& pattern, int32_t num_layers,
                                 const std::vector<std::string>& type_names) {
    if (static_cast<int64_t>(type_names.size()) < num_layers)
        fail(DS_ERR_INVALID_ARGUMENT, "partition method \"type:%s\" needs type_names for all %d layers",
             pattern.c_str(), num_layers);
    std::regex re;
    try {
        re = std::regex(pattern, std::regex::ECMAScript | std::regex::icase);
    } catch (const std::regex_error& e) {
        fail(DS_ERR_INVALID_ARGUMENT, "partition method \"type:%s\": not a valid regular expression (%s)",
             pattern.c_str(), e.what());
    }
    std::vector<double> w(static_cast<size_t>(num_layers), 0.0);
    bool any = false;
    for (int32_t i = 0; i < num_layers; ++i)
        if (std::regex_search(type_names[i], re)) w[i] = 1.0, any = true;
    if (!any)
        fail(DS_ERR_INVALID_ARGUMENT, "partition method \"type:%s\" matches no layer's type name", pattern.c_str());
    return w;
}

}  // namespace

PartitionInput partition_input(const std::string& method) {
    const std::string m = lowered(method);
    return m == "parameters" ? PartitionInput::ParamCounts
           : m.rfind("type:", 0) == 0 ? PartitionInput::TypeNames
                                      : PartitionInput::None;
}

std::vector<int32_t> partition_layers(const std::string& method_in, int32_t num_layers,
                                      const std::vector<int64_t>& param_counts,
                                      const std::vector<std::string>& type_names, int32_t num_parts) {
    if (num_parts < 1) fail(DS_ERR_INVALID_ARGUMENT, "num_stages = %d: must be >= 1", num_parts);
    if (num_layers < 0) fail(DS_ERR_INVALID_ARGUMENT, "num_layers = %d: must be >= 0", num_layers);
    const std::string method = lowered(method_in);  // DeepSpeed lowers the whole string, regex included
    if (method == "uniform") return partition_uniform(num_layers, num_parts);
    switch (partition_input(method)) {
        case PartitionInput::ParamCounts: {
            if (static_cast<int64_t>(param_counts.size()) < num_layers)
                fail(DS_ERR_INVALID_ARGUMENT, "partition method \"parameters\" needs param_counts for all %d layers",
                     num_layers);
            std::vector<double> w(static_cast<size_t>(num_layers));
            for (int32_t i = 0; i < num_layers; ++i) {
                if (param_counts[i] < 0)
                    fail(DS_ERR_INVALID_ARGUMENT, "param_counts[%d] = %lld: must be >= 0", i,
                         static_cast<long long>(param_counts[i]));
                w[i] = static_cast<double>(param_counts[i]);
            }
            return partition_balanced(w, num_parts);
        }
        case PartitionInput::TypeNames: {
            // DeepSpeed takes the text between the first and the second ':'.
            const std::string rest = method.substr(5);
            return partition_balanced(type_weights(rest.substr(0, rest.find(':')), num_layers, type_names),
                                      num_parts);
        }
        case PartitionInput::None:
            break;
    }
    if (method == "profile")
        fail(DS_ERR_UNSUPPORTED, "partition method \"profile\" is not implemented (nor is it in DeepSpeed)");
    fail(DS_ERR_INVALID_ARGUMENT, "partition method \"%s\": expected \"uniform\", \"parameters\" or \"type:<regex>\"",
         method_in.c_str());
}

}  // namespace ds::pipe
