// MoeLayer on a device (moe_layer.h): what runs where.
//   gate:     the Linear on the device (fp32 products); its logits [S, E]
//             cross to the host, where the gating runs (kernels/nn_moe.h:
//             top-k, capacity, the random draws; S x E floats, small next to
//             the experts' work), and the backward's d logits cross back;
//   dispatch: each expert's kept routes in slot order (token rows and
//             combine weights, one int32 and one float per route) cross to
//             the device once per forward; the expert's input rows are
//             gathered there (moe_rows_gather), it runs on the device, and
//             its output rows, times their weights, are added into the
//             tokens' rows (moe_rows_scatter_add: a token has at most one
//             route per expert, so the adds never collide);
//   backward: the mirror, with each route's d weight a row dot
//             (moe_rows_dot) read back to the host for the gate's backward.
// The arithmetic is the CPU path's (moe_layer.cpp), operation for
// operation and in the same order, so on host memory the two agree bit for
// bit (tests/unit/test_model_on_device.cpp). Jitter: the gate's input is x
// times factors drawn on the device (moe_jitter, the Philox stream the CPU
// draws from: the same factors bit for bit), the backward adds d gin times
// the same factors into dx. Expert parallelism (an engine's sharded layer)
// exchanges its token blocks in device memory: moe_ep_device.cpp.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/tensor_transfer.h"
#include "nn/block_util.h"
#include "nn/layer_util.h"
#include "nn/moe_layer.h"

namespace ds::nn {

namespace {

Tensor host_copy(const Tensor& t, RunContext& ctx) { return copy_to_device(t, Device::cpu(), run_allocator(ctx)); }

template <class T>
Tensor host_vector(std::vector<T>& v, DType dtype) {
    return Tensor::borrow(v.data(), {static_cast<int64_t>(v.size())}, {}, dtype, Device::cpu());
}

}  // namespace

Tensor MoeLayer::forward_on_device(const Tensor& x2, const Tensor& gin, RunContext& ctx) {
    const int64_t C = hidden_, S = x2.shape()[0];
    RunContext gctx = ctx;
    gctx.matmul_dtype = DType::F32;
    Tensor logits = call_forward(*gate_, gin, gctx);
    route(host_copy(logits, ctx).data<float>(), S, ctx);
    if (!ctx.training) gate_->clear_saved();
    Tensor y = Tensor::zeros({S, C}, DType::F32, ctx.device, run_allocator(ctx), MemCategory::Buffers);
    if (ep_.size > 1)
        forward_experts_ep_on_device(x2, y, ctx);  // moe_ep_device.cpp
    else
        forward_local_experts_on_device(x2, y, ctx);
    return mix_residual_on_device(x2, y, ctx);
}

void MoeLayer::forward_local_experts_on_device(const Tensor& x2, const Tensor& y, RunContext& ctx) {
    const int64_t C = hidden_, S = x2.shape()[0], E = cfg_.num_experts;
    const size_t k = static_cast<size_t>(cfg_.k);
    // Each expert's kept routes in slot order.
    route_start_.assign(static_cast<size_t>(E) + 1, 0);
    for (size_t r = 0; r < slot_.size(); ++r)
        if (slot_[r] >= 0) route_start_[static_cast<size_t>(expert_[r]) + 1] += 1;
    for (int64_t e = 0; e < E; ++e) route_start_[size_t(e) + 1] += route_start_[size_t(e)];
    const int64_t kept = route_start_.back();
    std::vector<int32_t> rows(static_cast<size_t>(kept));
    std::vector<float> weights(rows.size());
    for (size_t r = 0; r < slot_.size(); ++r) {
        if (slot_[r] < 0) continue;
        const int64_t at = route_start_[static_cast<size_t>(expert_[r])] + slot_[r];
        DS_CHECK(at < route_start_[static_cast<size_t>(expert_[r]) + 1], DS_ERR_INTERNAL,
                 "MoE: slot %d of expert %d beyond its kept routes", slot_[r], expert_[r]);
        rows[static_cast<size_t>(at)] = static_cast<int32_t>(r / k);
        weights[static_cast<size_t>(at)] = weight_[r];
    }
    route_rows_ = on_run_device(host_vector(rows, DType::I32), ctx);
    route_weight_ = on_run_device(host_vector(weights, DType::F32), ctx);

    const Kernels& kn = ctx.kernels;
    expert_out_.resize(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
        const int64_t first = route_start_[size_t(e)], ne = route_start_[size_t(e) + 1] - first;
        if (ne == 0) continue;
        const int32_t* idx = route_rows_.data<int32_t>() + first;
        Tensor xe = new_activation({ne, C}, ctx);
        kn.moe_rows_gather(x2.data<float>(), S, C, idx, nullptr, ne, xe.data<float>());
        Tensor ye = call_forward(*experts_[static_cast<size_t>(e)], xe, ctx);
        kn.moe_rows_scatter_add(ye.data<float>(), ne, C, idx, route_weight_.data<float>() + first, S, y.data<float>());
        if (ctx.training) expert_out_[static_cast<size_t>(e)].keep(ye, ctx);
    }
}

Tensor MoeLayer::mix_residual_on_device(const Tensor& x2, const Tensor& y, RunContext& ctx) {
    const int64_t C = hidden_, S = x2.shape()[0];
    const Kernels& kn = ctx.kernels;
    if (!mlp_) {
        have_forward_ = ctx.training;
        return y;
    }
    // use_residual: out = y * c0 + mlp(x) * c1, (c0, c1) = softmax(coefficient(x)) per token.
    Tensor m = call_forward(*mlp_, x2, ctx);
    Tensor cl = host_copy(call_forward(*coefficient_, x2, ctx), ctx);
    const float* clv = cl.data<float>();
    coef_host_.resize(static_cast<size_t>(2 * S));
    std::vector<float> c0(static_cast<size_t>(S)), c1(static_cast<size_t>(S));
    std::vector<int32_t> ident(static_cast<size_t>(S));
    for (int64_t s = 0; s < S; ++s) {
        const float mx = std::max(clv[2 * s], clv[2 * s + 1]);
        const float e0 = std::exp(clv[2 * s] - mx), e1 = std::exp(clv[2 * s + 1] - mx);
        c0[size_t(s)] = coef_host_[size_t(2 * s)] = e0 / (e0 + e1);
        c1[size_t(s)] = coef_host_[size_t(2 * s + 1)] = e1 / (e0 + e1);
        ident[size_t(s)] = static_cast<int32_t>(s);
    }
    ident_rows_ = on_run_device(host_vector(ident, DType::I32), ctx);
    coef0_ = on_run_device(host_vector(c0, DType::F32), ctx);
    coef1_ = on_run_device(host_vector(c1, DType::F32), ctx);
    Tensor out = new_activation({S, C}, ctx);
    const int32_t* id = ident_rows_.data<int32_t>();
    kn.moe_rows_gather(y.data<float>(), S, C, id, coef0_.data<float>(), S, out.data<float>());
    kn.moe_rows_scatter_add(m.data<float>(), S, C, id, coef1_.data<float>(), S, out.data<float>());
    if (ctx.training) {
        moe_out_.keep(y, ctx);
        mlp_out_.keep(m, ctx);
    }
    have_forward_ = ctx.training;
    return out;
}

Tensor MoeLayer::backward_on_device(const Tensor& dy, RunContext& ctx) {
    const int64_t C = hidden_, S = dy.shape()[0], E = cfg_.num_experts;
    const Kernels& kn = ctx.kernels;
    Tensor dx = Tensor::zeros({S, C}, DType::F32, ctx.device, run_allocator(ctx), MemCategory::Buffers);
    auto add_rows = [&](const Tensor& t) { kn.add_inplace(dx.data<float>(), t.data<float>(), static_cast<size_t>(S * C)); };

    Tensor dmoe = dy;
    if (mlp_) {
        const int32_t* id = ident_rows_.data<int32_t>();
        dmoe = new_activation({S, C}, ctx);
        Tensor dmlp = new_activation({S, C}, ctx);
        kn.moe_rows_gather(dy.data<float>(), S, C, id, coef0_.data<float>(), S, dmoe.data<float>());
        kn.moe_rows_gather(dy.data<float>(), S, C, id, coef1_.data<float>(), S, dmlp.data<float>());
        Tensor g = Tensor::empty({2, S}, DType::F32, ctx.device, run_allocator(ctx), MemCategory::Buffers);
        kn.moe_rows_dot(dy.data<float>(), S, C, id, moe_out_.get().data<float>(), S, g.data<float>());
        kn.moe_rows_dot(dy.data<float>(), S, C, id, mlp_out_.get().data<float>(), S, g.data<float>() + S);
        Tensor gh = host_copy(g, ctx);
        const float* g0 = gh.data<float>();
        const float* g1 = g0 + S;
        std::vector<float> dc(static_cast<size_t>(2 * S));
        for (int64_t s = 0; s < S; ++s) {  // the 2-way softmax's backward
            const float a = coef_host_[size_t(2 * s)], b = coef_host_[size_t(2 * s + 1)];
            const float dot = a * g0[s] + b * g1[s];
            dc[size_t(2 * s)] = a * (g0[s] - dot);
            dc[size_t(2 * s + 1)] = b * (g1[s] - dot);
        }
        add_rows(coefficient_->backward(on_run_device(host_vector(dc, DType::F32), ctx).view({S, 2}), ctx));
        add_rows(mlp_->backward(dmlp, ctx));
    }

    std::vector<float> dweight(weight_.size(), 0.0f);
    if (ep_.size > 1)
        backward_experts_ep_on_device(dmoe, dx, dweight, ctx);  // moe_ep_device.cpp
    else
        backward_local_experts_on_device(dmoe, dx, dweight, ctx);
    std::vector<float> dlogits(static_cast<size_t>(S * E));
    if (dsk_cpu_moe_gate_bwd(probs_.data(), static_cast<size_t>(S), static_cast<size_t>(E), cfg_.k, expert_.data(),
                             slot_.data(), dweight.data(), aux_grad_, dlogits.data()) != DSK_OK)
        fail(DS_ERR_INTERNAL, "MoE%s: %s", module_label(*this).c_str(), dsk_last_error());
    aux_grad_ = 0.0f;
    RunContext gctx = ctx;
    gctx.matmul_dtype = DType::F32;
    Tensor dgin = gate_->backward(on_run_device(host_vector(dlogits, DType::F32), ctx).view({S, E}), gctx);
    if (jittered_)  // d x += d gin * factor, the factors drawn again on the device
        jitter(dgin.data<float>(), S, /*accumulate=*/true, dx.data<float>(), ctx);
    else
        add_rows(dgin);
    drop_saved();
    return dx;
}

// Combine's backward per expert: d weight of each route (a row dot), the
// expert's output gradient (weight * d y of its token), its backward, and its
// input gradient added into the tokens' rows.
void MoeLayer::backward_local_experts_on_device(const Tensor& dmoe, const Tensor& dx, std::vector<float>& dweight,
                                                RunContext& ctx) {
    const int64_t C = hidden_, S = dmoe.shape()[0], E = cfg_.num_experts;
    const Kernels& kn = ctx.kernels;
    Tensor dw = Tensor::empty({std::max<int64_t>(1, route_start_.back())}, DType::F32, ctx.device,
                              run_allocator(ctx), MemCategory::Buffers);
    for (int64_t e = 0; e < E; ++e) {
        const Tensor& ye = expert_out_[static_cast<size_t>(e)].get();
        if (!ye.defined()) continue;
        const int64_t first = route_start_[size_t(e)], ne = route_start_[size_t(e) + 1] - first;
        const int32_t* idx = route_rows_.data<int32_t>() + first;
        kn.moe_rows_dot(dmoe.data<float>(), S, C, idx, ye.data<float>(), ne, dw.data<float>() + first);
        Tensor dye = new_activation({ne, C}, ctx);
        kn.moe_rows_gather(dmoe.data<float>(), S, C, idx, route_weight_.data<float>() + first, ne, dye.data<float>());
        Tensor dxe = experts_[static_cast<size_t>(e)]->backward(dye, ctx);
        kn.moe_rows_scatter_add(dxe.data<float>(), ne, C, idx, nullptr, S, dx.data<float>());
    }
    // Each route's d weight back in route order, then the gating's backward on the host.
    Tensor dwh = host_copy(dw, ctx);
    for (size_t r = 0; r < slot_.size(); ++r)
        if (slot_[r] >= 0) dweight[r] = dwh.data<float>()[route_start_[static_cast<size_t>(expert_[r])] + slot_[r]];
}

}  // namespace ds::nn
