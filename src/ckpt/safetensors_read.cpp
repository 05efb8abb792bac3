// Strict safetensors header validation (see safetensors.h for the rules).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ckpt/names.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/json/json_messages.h"
#include "core/json/json_text.h"

namespace ds::ckpt {

namespace {

struct DTypeRow {
    const char* name;
    size_t size;
};
constexpr DTypeRow kDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
    {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8},
};

// Integers in JSON numbers are exact below 2^53 (cJSON stores doubles);
// writers check the same limit (names.h).
constexpr double kMaxExactInt = static_cast<double>(kMaxDim) + 1.0;

uint64_t read_u64_le(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

uint64_t as_index(const cJSON* v, const std::string& what, const std::string& where) {
    DS_CHECK(cJSON_IsNumber(v), DS_ERR_FORMAT, "%s: %s must be a non-negative integer, got %s", what.c_str(),
             where.c_str(), json::describe(v).c_str());
    const double d = v->valuedouble;
    DS_CHECK(d >= 0 && d < kMaxExactInt && std::floor(d) == d, DS_ERR_FORMAT,
             "%s: %s = %s is not an integer in [0, 2^53)", what.c_str(), where.c_str(),
             json::describe(v).c_str());
    return static_cast<uint64_t>(d);
}

StTensor parse_tensor(const cJSON* obj, const std::string& what) {
    StTensor t;
    t.name = obj->string;
    const std::string where = "tensor '" + t.name + "'";
    DS_CHECK(!t.name.empty(), DS_ERR_FORMAT, "%s: a tensor has an empty name", what.c_str());
    DS_CHECK(cJSON_IsObject(obj), DS_ERR_FORMAT, "%s: %s is not a JSON object", what.c_str(), where.c_str());
    const cJSON *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
    for (const cJSON* c = obj->child; c; c = c->next) {
        if (std::strcmp(c->string, "dtype") == 0) dtype = c;
        else if (std::strcmp(c->string, "shape") == 0) shape = c;
        else if (std::strcmp(c->string, "data_offsets") == 0) offsets = c;
        else fail(DS_ERR_FORMAT, "%s: %s has an unknown key '%s'", what.c_str(), where.c_str(), c->string);
    }
    DS_CHECK(dtype && shape && offsets, DS_ERR_FORMAT, "%s: %s lacks '%s'", what.c_str(), where.c_str(),
             !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    DS_CHECK(cJSON_IsString(dtype), DS_ERR_FORMAT, "%s: %s: dtype must be a string", what.c_str(), where.c_str());
    t.dtype = dtype->valuestring;
    const size_t esize = st_dtype_size(t.dtype);
    DS_CHECK(esize > 0, DS_ERR_FORMAT, "%s: %s: unknown dtype \"%s\"", what.c_str(), where.c_str(),
             t.dtype.c_str());
    DS_CHECK(cJSON_IsArray(shape), DS_ERR_FORMAT, "%s: %s: shape must be an array", what.c_str(), where.c_str());
    uint64_t numel = 1;
    bool overflow = false;
    for (const cJSON* d = shape->child; d; d = d->next) {
        const uint64_t n = as_index(d, what, where + " shape[" + std::to_string(t.shape.size()) + "]");
        t.shape.push_back(static_cast<int64_t>(n));
        if (n != 0 && numel > (uint64_t{1} << 62) / n) overflow = true;
        numel *= n;
    }
    DS_CHECK(!overflow && numel <= (uint64_t{1} << 62) / esize, DS_ERR_FORMAT,
             "%s: %s: shape %s is too large", what.c_str(), where.c_str(), shape_to_string(t.shape).c_str());
    DS_CHECK(cJSON_IsArray(offsets) && cJSON_GetArraySize(offsets) == 2, DS_ERR_FORMAT,
             "%s: %s: data_offsets must be an array [begin, end]", what.c_str(), where.c_str());
    t.begin = as_index(offsets->child, what, where + " data_offsets[0]");
    t.end = as_index(offsets->child->next, what, where + " data_offsets[1]");
    DS_CHECK(t.begin <= t.end, DS_ERR_FORMAT, "%s: %s: data_offsets [%llu, %llu] end before begin", what.c_str(),
             where.c_str(), static_cast<unsigned long long>(t.begin), static_cast<unsigned long long>(t.end));
    DS_CHECK(t.end - t.begin == numel * esize, DS_ERR_FORMAT,
             "%s: %s: data_offsets span %llu bytes but %s x %s needs %llu", what.c_str(), where.c_str(),
             static_cast<unsigned long long>(t.end - t.begin), t.dtype.c_str(), shape_to_string(t.shape).c_str(),
             static_cast<unsigned long long>(numel * esize));
    return t;
}

StHeader parse_header_json(const char* json, size_t len, uint64_t data_size, const std::string& what) {
    size_t n = len;
    while (n > 0 && json[n - 1] == ' ') --n;  // padding
    DS_CHECK(n > 0 && json[0] == '{', DS_ERR_FORMAT, "%s: the safetensors header is not a JSON object",
             what.c_str());
    const json::JsonPtr doc =
        json::parse_text(std::string_view(json, n), {DS_ERR_FORMAT, what + ": safetensors header: ", "JSON"});
    const cJSON* root = doc.get();
    DS_CHECK(cJSON_IsObject(root), DS_ERR_FORMAT, "%s: the safetensors header is not a JSON object", what.c_str());
    StHeader h;
    for (const cJSON* c = root->child; c; c = c->next) {
        if (std::strcmp(c->string, "__metadata__") == 0) {
            DS_CHECK(cJSON_IsObject(c), DS_ERR_FORMAT, "%s: __metadata__ must be an object of strings",
                     what.c_str());
            for (const cJSON* m = c->child; m; m = m->next) {
                DS_CHECK(cJSON_IsString(m), DS_ERR_FORMAT, "%s: __metadata__.%s is not a string", what.c_str(),
                         m->string);
                h.metadata[m->string] = m->valuestring;
            }
            continue;
        }
        h.tensors.push_back(parse_tensor(c, what));
    }
    std::stable_sort(h.tensors.begin(), h.tensors.end(), [](const StTensor& a, const StTensor& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    for (size_t i = 0; i < h.tensors.size(); ++i) h.index.emplace(h.tensors[i].name, i);
    uint64_t pos = 0;
    for (const StTensor& t : h.tensors) {
        DS_CHECK(t.begin == pos, DS_ERR_FORMAT,
                 "%s: tensor '%s' starts at data offset %llu but the previous one ends at %llu (%s)", what.c_str(),
                 t.name.c_str(), static_cast<unsigned long long>(t.begin), static_cast<unsigned long long>(pos),
                 t.begin < pos ? "overlap" : "gap");
        pos = t.end;
    }
    DS_CHECK(pos == data_size, DS_ERR_FORMAT,
             "%s: the tensors cover %llu data bytes but the file holds %llu after the header", what.c_str(),
             static_cast<unsigned long long>(pos), static_cast<unsigned long long>(data_size));
    return h;
}

uint64_t header_length(const uint8_t* first8, uint64_t file_size, const std::string& what) {
    const uint64_t n = read_u64_le(first8);
    DS_CHECK(n > 0 && n <= kMaxSafetensorsHeader, DS_ERR_FORMAT,
             "%s: safetensors header length %llu is outside [1, %llu]", what.c_str(),
             static_cast<unsigned long long>(n), static_cast<unsigned long long>(kMaxSafetensorsHeader));
    DS_CHECK(n <= file_size - 8, DS_ERR_FORMAT,
             "%s: safetensors header length %llu exceeds the file (%llu bytes)", what.c_str(),
             static_cast<unsigned long long>(n), static_cast<unsigned long long>(file_size));
    return n;
}

}  // namespace

const char* st_dtype_name(DType d) {
    switch (d) {
        case DType::F32: return "F32";
        case DType::F16: return "F16";
        case DType::BF16: return "BF16";
        case DType::I8: return "I8";
        case DType::U8: return "U8";
        case DType::I32: return "I32";
        case DType::I64: return "I64";
    }
    fail(DS_ERR_INTERNAL, "no safetensors name for dtype %d", static_cast<int>(d));
}

std::optional<DType> st_dtype_to_dtype(const std::string& name) {
    for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::U8, DType::I32, DType::I64})
        if (name == st_dtype_name(d)) return d;
    return std::nullopt;
}

size_t st_dtype_size(const std::string& name) {
    for (const DTypeRow& r : kDTypes)
        if (name == r.name) return r.size;
    return 0;
}

const StTensor* StHeader::find(const std::string& name) const {
    auto it = index.find(name);
    return it == index.end() ? nullptr : &tensors[it->second];
}

StHeader parse_safetensors(const uint8_t* data, uint64_t size, const std::string& what) {
    DS_CHECK(size >= 8, DS_ERR_FORMAT, "%s: %llu bytes is too short for a safetensors file", what.c_str(),
             static_cast<unsigned long long>(size));
    const uint64_t n = header_length(data, size, what);
    StHeader h = parse_header_json(reinterpret_cast<const char*>(data + 8), static_cast<size_t>(n),
                                   size - 8 - n, what);
    h.data_start = 8 + n;
    return h;
}

StHeader read_safetensors_header(const FileReader& file) {
    const std::string& what = file.path();
    DS_CHECK(file.size() >= 8, DS_ERR_FORMAT, "%s: %llu bytes is too short for a safetensors file", what.c_str(),
             static_cast<unsigned long long>(file.size()));
    uint8_t first8[8];
    file.read_at(0, first8, 8);
    const uint64_t n = header_length(first8, file.size(), what);
    std::string json(static_cast<size_t>(n), '\0');
    file.read_at(8, &json[0], json.size());
    StHeader h = parse_header_json(json.data(), json.size(), file.size() - 8 - n, what);
    h.data_start = 8 + n;
    return h;
}

}  // namespace ds::ckpt
