// A built-in GPT on an ds::Engine for the failure tests (test_model_zero3_failure.cpp,
// test_grad_pipe_failure.cpp): micro-batch k of 2 x 8 token ids (and
// targets) in host memory, a training micro-step, and the fp32 masters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "engine/engine.h"
#include "nn/model.h"

namespace gpt_engine_test {

// A host DLTensor over `data` with its own shape.
struct Dl {
    DLTensor t{};
    std::vector<int64_t> shape;
    Dl(void* data, std::vector<int64_t> s, DLDataType dt) : shape(std::move(s)) {
        t.data = data;
        t.device = {kDLCPU, 0};
        t.ndim = static_cast<int32_t>(shape.size());
        t.dtype = dt;
        t.shape = shape.data();
    }
};

struct GptEngine {
    static constexpr int64_t kB = 2, kT = 8;
    int32_t vocab;
    std::shared_ptr<ds::nn::Model> model;
    std::unique_ptr<ds::Engine> e;

    // `spec`'s vocab_size must be `vocab_size`.
    GptEngine(const char* spec, int32_t vocab_size, const std::string& json, const ds::EngineOptions& o)
        : vocab(vocab_size), model(ds::nn::build_model(spec)) {
        e = std::make_unique<ds::Engine>(json, o);
        e->attach_model(model);
    }
    // Micro-batch k's forward: its loss.
    float forward(int k) {
        std::vector<int32_t> ids(kB * kT), tg(kB * kT);
        for (int64_t i = 0; i < kB * kT; ++i) {
            ids[size_t(i)] = int32_t((i * 5 + 3 * k + 1) % vocab);
            tg[size_t(i)] = int32_t((i * 7 + k) % vocab);
        }
        Dl in[2] = {Dl(ids.data(), {kB, kT}, {kDLInt, 32, 1}), Dl(tg.data(), {kB, kT}, {kDLInt, 32, 1})};
        DLTensor inputs[2] = {in[0].t, in[1].t};
        float loss = 0.0f;
        Dl lo(&loss, {}, {kDLFloat, 32, 1});
        e->forward(inputs, 2, &lo.t);
        return loss;
    }
    float train(int k) {
        const float loss = forward(k);
        e->backward(nullptr);
        e->step();
        return loss;
    }
    std::vector<float> master() {
        std::vector<float> all;
        for (ds::nn::Param* p : model->params()) {
            std::vector<float> v(static_cast<size_t>(ds::checked_numel(p->shape, p->name.c_str())));
            Dl d(v.data(), p->shape, {kDLFloat, 32, 1});
            e->get_full(ds::FullTensor::Param, p->name.c_str(), nullptr, &d.t);
            all.insert(all.end(), v.begin(), v.end());
        }
        return all;
    }
    int64_t bytes(ds::MemCategory c) const { return e->allocator().bytes(c); }
};

}  // namespace gpt_engine_test
