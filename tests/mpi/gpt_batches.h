// Shared by the MPI tests that train a small built-in GPT through the C++
// engine (test_model_zero.cpp, test_model_on_device_ranks.cpp): the engine
// with its model attached, and one forward of a deterministic micro-batch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/device.h"
#include "core/dlpack_interop.h"
#include "engine/engine.h"
#include "engine/engine_model.h"
#include "nn/model.h"
#include "zero_test_util.h"

namespace ds_gpt_test {

constexpr int64_t kB = 2, kT = 8, kV = 24;  // micro-batch, sequence, vocabulary of the specs below

// An engine for `json` on `device` (null comm: the world) training the model of `spec`.
inline std::unique_ptr<ds::Engine> make(const std::string& json, const char* spec,
                                        std::shared_ptr<ds::comm::Communicator> comm = nullptr,
                                        ds::Device device = ds::Device::cpu()) {
    auto e = std::make_unique<ds::Engine>(json, ds_zero_test::options_on(device), std::move(comm));
    e->attach_model(std::shared_ptr<ds::nn::Model>(ds::nn::build_model(spec)));
    return e;
}

// The built-in GPT's parameters by place, in elements padded to a multiple
// of `world` (the size of a ZeRO-3 gathered copy): outside the transformer
// layers, per layer (names "...h.<k>...", k < n_layer <= 10), all, and the
// largest parameter.
struct GptSplit {
    int64_t outside = 0, all = 0, largest = 0;
    std::vector<int64_t> layer;
    int64_t widest() const { return layer.empty() ? 0 : *std::max_element(layer.begin(), layer.end()); }
};

inline GptSplit gpt_split(ds::Engine& e, int world, size_t n_layer) {
    GptSplit s;
    s.layer.assign(n_layer, 0);
    for (const ds::Param& p : e.params().all()) {
        const int64_t padded = (p.numel + world - 1) / world * world;
        s.all += padded;
        s.largest = std::max(s.largest, padded);
        const size_t at = p.name.find("h.");
        if (at != std::string::npos && (at == 0 || p.name[at - 1] == '.'))
            s.layer[static_cast<size_t>(p.name[at + 2] - '0')] += padded;
        else
            s.outside += padded;
    }
    return s;
}

// ds_forward of the micro-batch with token ids (i * mul + add) % kV and
// next-token targets (+ 1), inputs and loss in host memory: the loss.
inline float forward_tokens(ds::Engine& e, int64_t mul, int64_t add) {
    std::vector<int32_t> ids(kB * kT), tg(kB * kT);
    for (int64_t i = 0; i < kB * kT; ++i) {
        ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * mul + add) % kV);
        tg[static_cast<size_t>(i)] = static_cast<int32_t>((i * mul + add + 1) % kV);
    }
    int64_t shape[2] = {kB, kT};
    DLTensor in[2] = {{ids.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0},
                      {tg.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0}};
    float loss = 0.0f;
    DLTensor out{&loss, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
    e.forward(in, 2, &out);
    return loss;
}

}  // namespace ds_gpt_test
