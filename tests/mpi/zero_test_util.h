// Shared by the ZeRO tests under mpirun (test_zero_stages.cpp,
// test_zero_nvme_offload.cpp, ...): the parameter set, the deterministic
// gradients, the config builder, the engine factory, one micro-step, and
// the full fp32 copies of a parameter. config(): sub_group_size 0 leaves
// DeepSpeed's default.
#pragma once

#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/factory.h"
#include "engine/engine.h"

namespace ds_zero_test {

inline const std::vector<int64_t> kSizes = {1, 3, 7, 31, 101, 1009, 4099};

// Deterministic "data": the gradient of micro-batch k for parameter i,
// element j, as a function of the current weight (so errors would compound).
inline float grad_of(float w, int64_t k, size_t i, int64_t j) {
    uint64_t h = static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull) ^
                 (static_cast<uint64_t>(j) * 0x94D049BB133111EBull);
    h ^= h >> 31;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 29;
    const float noise = static_cast<float>(h >> 40) / static_cast<float>(1 << 24) - 0.5f;
    return 0.05f * (w - 0.25f) + 0.02f * noise;
}

inline float to_f32(const DLTensor& v, int64_t j) {
    if (v.dtype.bits == 32) return static_cast<const float*>(v.data)[j];
    const uint16_t h = static_cast<const uint16_t*>(v.data)[j];
    uint32_t bits;
    if (v.dtype.code == kDLBfloat) {
        bits = static_cast<uint32_t>(h) << 16;
    } else {  // fp16, normal and zero values only (the weights here are ~N(0,1))
        const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
        bits = exp == 0 ? sign : sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

inline std::string config(int stage, const char* dtype, int gas, double clip, bool overlap, int64_t bucket,
                          int64_t persistence = 100000, const std::string& offload = "", int64_t sub_group_size = 0) {
    std::string prec;
    if (std::string(dtype) == "fp16") prec = ", \"fp16\": {\"enabled\": true, \"initial_scale_power\": 8}";
    if (std::string(dtype) == "bf16") prec = ", \"bf16\": {\"enabled\": true}";
    return "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " + std::to_string(gas) +
           ", \"gradient_clipping\": " + std::to_string(clip) + prec +
           ", \"zero_optimization\": {\"stage\": " + std::to_string(stage) +
           ", \"overlap_comm\": " + (overlap ? "true" : "false") +
           ", \"reduce_bucket_size\": " + std::to_string(bucket) +
           ", \"param_persistence_threshold\": " + std::to_string(persistence) +
           (sub_group_size > 0 ? ", \"sub_group_size\": " + std::to_string(sub_group_size) : std::string()) +
           (offload.empty() ? "" : ", \"offload_optimizer\": " + offload) + "}" +
           ", \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}" +
           ", \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 5, "
           "\"warmup_type\": \"linear\", \"warmup_max_lr\": 0.001}}}";
}

// Quiet options for an engine on `device`: cuda:N makes an engine on a GPU, or
// on a host-backed one in tests/unit/host_backed_device.h.
inline ds::EngineOptions options_on(ds::Device device) {
    ds::EngineOptions o;
    o.log_level = DS_LOG_WARN;
    o.device_type = device.to_dl().device_type;
    o.device_index = device.index;
    return o;
}

// An engine with trainable parameters "p0", "p1", ... of `sizes` elements
// (fixed initial values) and a frozen one.
inline std::unique_ptr<ds::Engine> make(const std::string& json, std::shared_ptr<ds::comm::Communicator> comm,
                                        ds::Device device = ds::Device::cpu(),
                                        const std::vector<int64_t>& sizes = kSizes) {
    auto e = std::make_unique<ds::Engine>(json, options_on(device), std::move(comm));
    std::vector<std::vector<float>> init(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
        init[i].resize(static_cast<size_t>(sizes[i]));
        for (int64_t j = 0; j < sizes[i]; ++j)
            init[i][static_cast<size_t>(j)] = std::sin(static_cast<float>(j * 7 + static_cast<int64_t>(i)));
        int64_t shape = sizes[i];
        DLTensor t{};
        t.data = init[i].data();
        t.device = {kDLCPU, 0};
        t.ndim = 1;
        t.dtype = {kDLFloat, 32, 1};
        t.shape = &shape;
        e->add_param(("p" + std::to_string(i)).c_str(), &t, DS_PARAM_TRAINABLE);
    }
    float frozen[5] = {1, 2, 3, 4, 5};
    int64_t fshape = 5;
    DLTensor ft{};
    ft.data = frozen;
    ft.device = {kDLCPU, 0};
    ft.ndim = 1;
    ft.dtype = {kDLFloat, 32, 1};
    ft.shape = &fshape;
    e->add_param("frozen", &ft, 0);
    e->init();
    return e;
}

// One micro-step on `e` (made with `sizes`) for global micro-batch index k.
// With `gather`, the parameters are gathered around their use (ZeRO-3's
// GatheredParameters).
inline void micro_step(ds::Engine& e, int64_t k, bool gather = false, const std::vector<int64_t>& sizes = kSizes) {
    const float scale = static_cast<float>(e.loss_scale());
    std::vector<std::string> names;
    std::vector<const char*> cnames;
    for (size_t i = 0; i < sizes.size(); ++i) names.push_back("p" + std::to_string(i));
    for (const std::string& n : names) cnames.push_back(n.c_str());
    if (gather) e.gather(cnames.data(), static_cast<int32_t>(cnames.size()));
    std::vector<std::vector<float>> grads(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
        DLTensor v{};
        e.param_view(names[i].c_str(), &v);
        std::vector<float>& g = grads[i];
        g.resize(static_cast<size_t>(sizes[i]));
        for (int64_t j = 0; j < sizes[i]; ++j) g[static_cast<size_t>(j)] = scale * grad_of(to_f32(v, j), k, i, j);
    }
    if (gather) e.release(cnames.data(), static_cast<int32_t>(cnames.size()));
    for (size_t i = 0; i < sizes.size(); ++i) {
        const std::string& name = names[i];
        std::vector<float>& g = grads[i];
        int64_t shape = sizes[i];
        DLTensor t{};
        t.data = g.data();
        t.device = e.device().to_dl();  // an engine on cuda:N takes device gradients (host-backed in tests)
        t.ndim = 1;
        t.dtype = {kDLFloat, 32, 1};
        t.shape = &shape;
        e.accumulate_grad(name.c_str(), &t);
    }
    e.backward(nullptr);
    e.step();
}

struct TempDir {
    std::string path;
    TempDir() {
        char t[] = "/tmp/ds_nvme_mpi_XXXXXX";
        path = mkdtemp(t);
    }
    ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

// A 1-D fp32 host DLTensor over `v` (`*shape` = its size, kept by the caller).
inline DLTensor host_f32(std::vector<float>& v, int64_t* shape) {
    *shape = static_cast<int64_t>(v.size());
    DLTensor t{};
    t.data = v.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    return t;
}

inline std::vector<float> full(ds::Engine& e, ds::FullTensor which, const std::string& name, const char* state, int64_t n) {
    std::vector<float> out(static_cast<size_t>(n));
    int64_t shape = 0;
    const DLTensor t = host_f32(out, &shape);
    e.get_full(which, name.c_str(), state, &t);  // collective
    return out;
}

}  // namespace ds_zero_test
