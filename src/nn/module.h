// The built-in layers' common interface (issue 11). A Module maps one float32
// activation tensor to another and can run backward for its last forward:
// forward keeps what backward needs (its "saved" activations), backward adds
// into its parameters' gradients and returns the gradient of its input, then
// drops what it saved. Compositions (the GPT model, the DeepSpeed transformer
// layer, Sequential) are Modules made of Modules.
//
// Tensors are ds::Tensor (core/tensor.h), contiguous, row-major, on the
// run's device (RunContext::device: the host, or the GPU of a device-resident
// engine, whose kernels RunContext::kernels are);
// activations are [rows, features] with rows = batch x sequence. Token ids
// enter as int32/int64 tensors (Embedding). Parameters are fp32: the model
// owns their initial values; the engine binds each Param's `value` to the
// weights a forward must read (the engine's working weights, converted to
// fp32 when the engine trains in fp16/bf16 — or, for a Param whose modules
// read bf16 (reads_bf16: Linear weights, Embedding tables), a bf16 engine's
// working weights themselves, no copy) and `grad` to an fp32 buffer the
// engine takes after backward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/kernel_backend.h"
#include "core/tensor.h"

namespace ds::nn {

// One learnable tensor of a module.
struct Param {
    std::string name;    // full dotted name, e.g. "h.0.attn.c_attn.weight" (set by the owner)
    Shape shape;
    Tensor value;        // fp32 weights forward reads
    Tensor grad;         // fp32; backward adds into it (the owner zeroes it)
    bool trainable = true;
    // Every module reading `value` also accepts it in bf16 (set by Linear
    // for its own weight and by Embedding): a bf16 engine then binds its
    // working weights in place instead of an fp32 copy.
    bool reads_bf16 = false;
};

// Bytes of activations the modules keep for backward, now and at peak
// (activation checkpointing reports the difference).
struct ActivationMeter {
    int64_t live_bytes = 0;
    int64_t peak_bytes = 0;
    void add(int64_t bytes) {
        live_bytes += bytes;
        if (live_bytes > peak_bytes) peak_bytes = live_bytes;
    }
    void sub(int64_t bytes) { live_bytes -= bytes; }
};

// Multiply-accumulates and floating-point operations of a forward, counted
// with the flops profiler's rules (docs/DEEPSPEED_SEMANTICS.md, flops profiler).
struct OpCount {
    double macs = 0.0;
    double flops = 0.0;
};

class Module;

// Observers of module forwards (the flops profiler's per-module latency and
// counts). Composite modules run their children through call_forward so
// the hooks see every module.
struct ForwardHooks {
    virtual ~ForwardHooks() = default;
    virtual void before_forward(Module& m) = 0;
    virtual void after_forward(Module& m) = 0;
};

// What one forward/backward pass runs with.
struct RunContext {
    Kernels kernels = cpu_kernels();
    // Where activations live and the kernels run: the layers allocate on it and
    // never read an element on the host (cuda:N: every access is a kernel).
    Device device = Device::cpu();
    Allocator* alloc = nullptr;     // activations are allocated here (MemCategory::Buffers)
    bool training = true;           // false: dropout is the identity
    uint64_t seed = 0;              // dropout stream (the engine's, checkpointed)
    uint64_t forward_index = 0;     // which forward of the stream: dropout masks are a pure
                                    // function of (seed, forward_index, module id, element)
    ActivationMeter* meter = nullptr;  // nullable
    ForwardHooks* hooks = nullptr;     // nullable
    // BF16: Linear rounds its matmul inputs (activations, weights, output
    // gradients) to bf16 and accumulates in fp32, as autocast does (the
    // engine sets it when its working dtype is bf16); F32: fp32 products.
    DType matmul_dtype = DType::F32;
};

class Module {
public:
    virtual ~Module() = default;
    // The layer's type, as the flops profiler prints it ("Linear", "LayerNorm").
    virtual const char* type() const = 0;
    // Direct sub-modules in forward order (empty for a leaf).
    virtual std::vector<Module*> children() { return {}; }
    // This module's own parameters (not its children's).
    virtual std::vector<Param*> own_params() { return {}; }
    // y = f(x). In training mode keeps what backward needs.
    virtual Tensor forward(const Tensor& x, RunContext& ctx) = 0;
    // dx for dy of the last forward; adds into own_params()' grads. Returns an
    // undefined Tensor where the input has no gradient (token ids).
    virtual Tensor backward(const Tensor& dy, RunContext& ctx) = 0;
    // Drops what forward kept (eval, an abandoned micro-step).
    virtual void clear_saved() {}
    // MACs/FLOPs of the last forward, this module alone (children excluded).
    virtual OpCount op_count() const { return {}; }

    // Dotted name within the model ("h.0.attn"); "" for the root.
    const std::string& name() const { return name_; }
    void set_name(std::string n) { name_ = std::move(n); }
    // A stable id, unique in the model (dropout streams key on it).
    uint32_t id() const { return id_; }
    void set_id(uint32_t id) { id_ = id; }

private:
    std::string name_;
    uint32_t id_ = 0;
};

// m.forward(x, ctx) between ctx.hooks' before/after (composites call their
// children through this).
Tensor call_forward(Module& m, const Tensor& x, RunContext& ctx);

// Every parameter of `m` and its descendants, depth first, in forward order.
std::vector<Param*> all_params(Module& m);

}  // namespace ds::nn
