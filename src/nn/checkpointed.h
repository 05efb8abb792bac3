// Activation checkpointing (DEEPSPEED_SEMANTICS.md §13): a wrapper Module
// whose forward runs the inner module and then drops everything the inner
// module saved, keeping only its input and the dropout key (seed,
// forward_index); backward runs the inner forward again with that key (the
// dropout masks are a pure function of it, so the recomputation is exact),
// then the inner backward. With cpu_checkpointing the kept input is a copy
// in a separate "cpu checkpoint" pool (this library trains on the CPU, so
// that is a copy within host memory: it changes which pool holds the bytes,
// not how many).
#pragma once

#include <memory>

#include "nn/module.h"

namespace ds::nn {

class Checkpointed final : public Module {
public:
    // `cpu_pool`: where the kept inputs are copied with cpu_checkpointing
    // (null: the input itself is kept, shared with the layer before).
    Checkpointed(std::unique_ptr<Module> inner, Allocator* cpu_pool);
    ~Checkpointed() override;

    const char* type() const override { return "CheckpointedLayer"; }
    std::vector<Module*> children() override { return {inner_.get()}; }
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override;

    Module& inner() { return *inner_; }
    // The wrapped module back (the wrapper is left empty).
    std::unique_ptr<Module> release_inner() { return std::move(inner_); }

private:
    void drop_input();

    std::unique_ptr<Module> inner_;
    Allocator* cpu_pool_;
    Tensor input_;
    int64_t input_bytes_ = 0;  // counted in the meter while kept
    ActivationMeter* meter_ = nullptr;
    uint64_t seed_ = 0;
    uint64_t forward_index_ = 0;
};

}  // namespace ds::nn
