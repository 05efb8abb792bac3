#include "monitor/flops_profiler.h"

#include <algorithm>
#include <functional>
#include <cmath>
#include <set>

#include "core/error.h"
#include "core/json/json_writer.h"

namespace ds::monitor {

namespace {

// Python's round(v, 2) (ties may differ in the last binary digit).
double round2(double v) { return std::round(v * 100.0) / 100.0; }

std::string g(double v) { return format("%g", v); }

// '{:<w}' of a string.
std::string left(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }

// DeepSpeed's summary line: '{:<70}  {:<8}'.
std::string line(const std::string& label, const std::string& value) { return left(label, 70) + "  " + left(value, 8); }

// The last component of a dotted module name: its key in its parent.
std::string key_of(const nn::Module& m) {
    const std::string& n = m.name();
    const size_t dot = n.rfind('.');
    return dot == std::string::npos ? n : n.substr(dot + 1);
}

// PyTorch's _addindent: every line but the first indented by n spaces.
std::string add_indent(const std::string& s, int n) {
    std::string out;
    for (char c : s) {
        out += c;
        if (c == '\n') out += std::string(static_cast<size_t>(n), ' ');
    }
    return out;
}

double pct(double part, double whole) { return whole != 0.0 ? round2(100.0 * part / whole) : 0.0; }

}  // namespace

std::string number_to_string(double num) {
    double mag = 1.0;
    const char* units = "";
    if (num >= 1e12) mag = 1e12, units = "T";
    else if (num >= 1e9) mag = 1e9, units = "G";
    else if (num >= 1e6) mag = 1e6, units = "M";
    else if (num >= 1e3) mag = 1e3, units = "K";
    else if (num >= 1 || num == 0) mag = 1, units = "";
    else if (num >= 1e-3) mag = 1e-3, units = "m";
    else mag = 1e-6, units = "u";
    return g(round2(num / mag)) + " " + units;
}

std::string macs_to_string(double macs) { return number_to_string(macs) + "MACs"; }
std::string flops_to_string(double flops) { return number_to_string(flops) + "FLOPS"; }
std::string duration_to_string(double secs) { return number_to_string(secs) + "s"; }
std::string params_to_string(double params) {
    std::string s = number_to_string(params);
    for (char& c : s)
        if (c == 'G') c = 'B';
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

void FlopsProfiler::start(nn::Module& root) {
    root_ = &root;
    stats_.clear();
    open_.clear();
    active_ = true;
}

void FlopsProfiler::clear() {
    root_ = nullptr;
    active_ = false;
    stats_.clear();
    open_.clear();
}

void FlopsProfiler::stop() {
    active_ = false;
    open_.clear();  // a forward that threw leaves modules open
}

void FlopsProfiler::before_forward(nn::Module& m) {
    if (!active_) return;
    open_.emplace_back(&m, std::chrono::steady_clock::now());
}

void FlopsProfiler::after_forward(nn::Module& m) {
    if (!active_) return;
    // The innermost open forward of m (forwards nest).
    for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
        if (it->first != &m) continue;
        Stats& s = stats_[&m];
        s.duration += std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second).count();
        const nn::OpCount c = m.op_count();
        s.macs += c.macs;
        s.flops += c.flops;
        open_.erase(std::next(it).base());
        return;
    }
}

double FlopsProfiler::params_of(nn::Module& m) const {
    std::set<const nn::Param*> seen;
    double n = 0.0;
    for (nn::Param* p : nn::all_params(m))
        if (p->trainable && seen.insert(p).second) {
            double e = 1.0;
            for (int64_t d : p->shape) e *= static_cast<double>(d);
            n += e;
        }
    return n;
}

double FlopsProfiler::macs_of(nn::Module& m) const {
    auto it = stats_.find(&m);
    double s = it == stats_.end() ? 0.0 : it->second.macs;
    for (nn::Module* c : m.children()) s += macs_of(*c);
    return s;
}

double FlopsProfiler::flops_of(nn::Module& m) const {
    auto it = stats_.find(&m);
    double s = it == stats_.end() ? 0.0 : it->second.flops;
    for (nn::Module* c : m.children()) s += flops_of(*c);
    return s;
}

double FlopsProfiler::duration_of(nn::Module& m) const {
    auto it = stats_.find(&m);
    double d = it == stats_.end() ? 0.0 : it->second.duration;
    if (d == 0.0)
        for (nn::Module* c : m.children()) d += duration_of(*c);
    return d;
}

double FlopsProfiler::total_params() const { return root_ ? params_of(*root_) : 0.0; }
double FlopsProfiler::total_macs() const { return root_ ? macs_of(*root_) : 0.0; }
double FlopsProfiler::total_flops() const { return root_ ? flops_of(*root_) : 0.0; }
double FlopsProfiler::total_duration() const { return root_ ? duration_of(*root_) : 0.0; }

std::string FlopsProfiler::module_repr(nn::Module& m) const {
    const double params = params_of(m), macs = macs_of(m), dur = duration_of(m), flops = flops_of(m);
    return params_to_string(params) + " = " + g(pct(params, total_params())) + "% Params, " + macs_to_string(macs) +
           " = " + g(pct(macs, total_macs())) + "% MACs, " + duration_to_string(dur) + " = " +
           g(pct(dur, total_duration())) + "% latency, " + flops_to_string(dur != 0.0 ? round2(flops / dur) : 0.0);
}

namespace {
// PyTorch's Module.__repr__ with the profile as each module's extra_repr.
std::string repr_of(const FlopsProfiler& p, nn::Module& m,
                    const std::function<std::string(nn::Module&)>& extra) {
    const std::vector<nn::Module*> kids = m.children();
    std::string s = std::string(m.type()) + "(";
    const std::string e = extra(m);
    if (kids.empty()) return s + e + ")";
    s += "\n  " + e;
    for (nn::Module* c : kids) s += "\n  (" + key_of(*c) + "): " + add_indent(repr_of(p, *c, extra), 2);
    return s + "\n)";
}
}  // namespace

std::vector<std::string> FlopsProfiler::report(const Facts& f, int64_t module_depth, int64_t top_modules,
                                               bool detailed) const {
    std::vector<std::string> out;
    if (!root_) return out;
    const double params = total_params(), macs = total_macs(), flops = total_flops();
    out.push_back("");
    out.push_back("-------------------------- DeepSpeed Flops Profiler --------------------------");
    out.push_back(format("Profile Summary at step %lld:", static_cast<long long>(f.profile_step)));
    out.push_back("Notations:");
    out.push_back("dp_size / mp_size: data / model parallel size; params: parameters;");
    out.push_back("MACs: multiply-accumulates; flops: floating-point operations; FLOPS: flops per second;");
    out.push_back("fwd / bwd latency: forward / backward time; step: the optimizer step's time;");
    out.push_back("iter: the sum of the fwd, bwd and step latencies");
    out.push_back("");
    out.push_back(line("world size: ", std::to_string(f.world_size)));
    out.push_back(line("data parallel size: ", std::to_string(f.world_size)));
    out.push_back(line("model parallel size: ", "1"));
    out.push_back(line("batch size per GPU: ", std::to_string(f.micro_batch)));
    out.push_back(line("params per GPU: ", params_to_string(params)));
    out.push_back(line("params of model = params per GPU * mp_size: ", params_to_string(params)));
    out.push_back(line("fwd MACs per GPU: ", macs_to_string(macs)));
    out.push_back(line("fwd flops per GPU: ", number_to_string(flops)));
    out.push_back(line("fwd flops of model = fwd flops per GPU * mp_size: ", number_to_string(flops)));
    const double fwd = f.fwd_s ? *f.fwd_s : total_duration();
    auto per = [](double x, double t) { return t > 0.0 ? x / t : 0.0; };
    out.push_back(line("fwd latency: ", duration_to_string(fwd)));
    out.push_back(line("fwd FLOPS per GPU = fwd flops per GPU / fwd latency: ", flops_to_string(per(flops, fwd))));
    if (f.fwd_s && f.bwd_s && f.step_s) {
        const double r = 2.0 + f.recompute_fwd_factor, bwd = *f.bwd_s, step = *f.step_s;
        out.push_back(line("bwd latency: ", duration_to_string(bwd)));
        out.push_back(line("bwd FLOPS per GPU = " + g(r) + " * fwd flops per GPU / bwd latency: ",
                           flops_to_string(per(r * flops, bwd))));
        out.push_back(line("fwd+bwd FLOPS per GPU = " + g(r + 1) + " * fwd flops per GPU / (fwd+bwd latency): ",
                           flops_to_string(per((r + 1) * flops, fwd + bwd))));
        out.push_back(line("step latency: ", duration_to_string(step)));
        const double iter = fwd + bwd + step;
        out.push_back(line("iter latency: ", duration_to_string(iter)));
        out.push_back(line("FLOPS per GPU = " + g(r + 1) + " * fwd flops per GPU / iter latency: ",
                           flops_to_string(per((r + 1) * flops, iter))));
        out.push_back(line("samples/second: ",
                           json::format_number(round2(per(static_cast<double>(f.micro_batch) * f.world_size, iter)))));
    }

    out.push_back("");
    out.push_back("----------------------------- Aggregated Profile per GPU -----------------------------");
    // Per depth, per module type (first seen first): MACs, params, latency.
    struct Agg {
        std::string type;
        double macs = 0.0, params = 0.0, dur = 0.0;
    };
    std::vector<std::vector<Agg>> info;
    std::function<void(nn::Module&, size_t)> walk = [&](nn::Module& m, size_t d) {
        if (info.size() <= d) info.resize(d + 1);
        auto it = std::find_if(info[d].begin(), info[d].end(), [&](const Agg& a) { return a.type == m.type(); });
        if (it == info[d].end()) it = info[d].insert(info[d].end(), Agg{m.type()});
        it->macs += macs_of(m);
        it->params += params_of(m);
        it->dur += duration_of(m);
        for (nn::Module* c : m.children()) walk(*c, d + 1);
    };
    walk(*root_, 0);
    // DeepSpeed prints depths 0 .. depth-1, depth = module_depth or (-1) the deepest.
    size_t depth = module_depth < 0 ? info.size() - 1 : static_cast<size_t>(module_depth);
    depth = std::min(depth, info.size());
    out.push_back(format("Top %lld modules in terms of params, MACs or fwd latency at different model depths:",
                         static_cast<long long>(top_modules)));
    for (size_t d = 0; d < depth; ++d) {
        const size_t n = std::min(static_cast<size_t>(std::max<int64_t>(top_modules, 0)), info[d].size());
        auto top = [&](double Agg::*field, std::string (*fmt)(double)) {
            std::vector<Agg> v = info[d];
            std::stable_sort(v.begin(), v.end(), [&](const Agg& a, const Agg& b) { return a.*field > b.*field; });
            std::string s = "{";
            for (size_t i = 0; i < n; ++i) s += (i ? ", '" : "'") + v[i].type + "': '" + fmt(v[i].*field) + "'";
            return s + "}";
        };
        out.push_back(format("depth %zu:", d));
        out.push_back("    params      - " + top(&Agg::params, params_to_string));
        out.push_back("    MACs        - " + top(&Agg::macs, macs_to_string));
        out.push_back("    fwd latency - " + top(&Agg::dur, duration_to_string));
    }

    if (detailed) {
        out.push_back("");
        out.push_back("------------------------------ Detailed Profile per GPU ------------------------------");
        out.push_back("After each module's name: its params and share of all params, its MACs and share, its fwd");
        out.push_back("latency and share, and its fwd FLOPS.");
        out.push_back("");
        out.push_back("Notes: 1. A module's MACs (or latency) can exceed the sum of its submodules': work it does");
        out.push_back("itself (the loss, residual additions) belongs to no submodule.");
        out.push_back("2. flops are counted from the operations' shapes, so FLOPS derived from them can exceed what");
        out.push_back("the hardware can run.");
        out.push_back("3. The top module's fwd latency is measured around its own forward: less than the engine's fwd");
        out.push_back("latency above.");
        out.push_back("");
        const std::string tree =
            repr_of(*this, *root_, [this](nn::Module& m) { return module_repr(m); });
        size_t at = 0;
        while (true) {
            const size_t nl = tree.find('\n', at);
            out.push_back(tree.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
            if (nl == std::string::npos) break;
            at = nl + 1;
        }
    }
    out.push_back("------------------------------------------------------------------------------");
    return out;
}

}  // namespace ds::monitor
