#include "nn/tp_linear.h"

#include <cstring>

#include "core/error.h"

namespace ds::nn {

namespace {

// `p`'s value as fp32 (an engine may have bound bf16 working weights).
Tensor fp32_value(const Linear& full, const Param& p) {
    DS_CHECK(p.value.defined() && p.value.device().is_cpu() && p.value.is_contiguous(), DS_ERR_INVALID_STATE,
             "tensor parallel: Linear '%s': %s has no contiguous host value to shard", full.name().c_str(),
             p.name.c_str());
    return p.value.dtype() == DType::F32 ? p.value
                                         : p.value.to(DType::F32, Allocator::process(), MemCategory::Params);
}

void copy_names(Linear& from, Linear& to) {
    to.set_name(from.name());
    to.set_id(from.id());
    to.weight().name = from.weight().name;
    if (to.has_bias()) to.bias().name = from.bias().name;
}

void check_unshared(Linear& full) {
    DS_CHECK(!full.weight_is_shared(), DS_ERR_UNSUPPORTED,
             "tensor parallel: Linear '%s' reads a shared (tied) weight; only owned weights are split",
             full.name().c_str());
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out_local, bool bias, const TpGroup& group)
    : Linear(in, out_local, bias), group_(group) {}

std::unique_ptr<ColumnParallelLinear> ColumnParallelLinear::shard(Linear& full, const TpGroup& group,
                                                                  int64_t blocks) {
    check_unshared(full);
    const int64_t out = full.out_features(), in = full.in_features();
    DS_CHECK(blocks >= 1 && out % (blocks * group.size) == 0, DS_ERR_INVALID_ARGUMENT,
             "tensor parallel: Linear '%s': out_features = %lld does not split into %lld block(s) x %d ranks",
             full.name().c_str(), static_cast<long long>(out), static_cast<long long>(blocks), group.size);
    const int64_t block = out / blocks, piece = block / group.size;
    auto local = std::make_unique<ColumnParallelLinear>(in, blocks * piece, full.has_bias(), group);
    const Tensor w = fp32_value(full, full.weight());
    float* lw = local->weight().value.data<float>();
    for (int64_t k = 0; k < blocks; ++k) {
        const int64_t src_row = k * block + group.rank * piece;
        std::memcpy(lw + k * piece * in, w.data<float>() + src_row * in, sizeof(float) * piece * in);
    }
    if (full.has_bias()) {
        const Tensor b = fp32_value(full, full.bias());
        for (int64_t k = 0; k < blocks; ++k)
            std::memcpy(local->bias().value.data<float>() + k * piece, b.data<float>() + k * block + group.rank * piece,
                        sizeof(float) * piece);
    }
    copy_names(full, *local);
    local->blocks_ = blocks;
    return local;
}

Tensor ColumnParallelLinear::backward(const Tensor& dy, RunContext& ctx) {
    Tensor dx = Linear::backward(dy, ctx);
    tp_all_reduce_sum(group_, dx);  // dx = sum over ranks of dy_r w_r
    return dx;
}

RowParallelLinear::RowParallelLinear(int64_t in_local, int64_t out, bool bias, const TpGroup& group)
    : Linear(in_local, out, bias), group_(group) {
    set_bias_in_product(false);
}

std::unique_ptr<RowParallelLinear> RowParallelLinear::shard(Linear& full, const TpGroup& group) {
    check_unshared(full);
    const int64_t out = full.out_features(), in = full.in_features();
    DS_CHECK(in % group.size == 0, DS_ERR_INVALID_ARGUMENT,
             "tensor parallel: Linear '%s': in_features = %lld does not split over %d ranks", full.name().c_str(),
             static_cast<long long>(in), group.size);
    const int64_t piece = in / group.size;
    auto local = std::make_unique<RowParallelLinear>(piece, out, full.has_bias(), group);
    const Tensor w = fp32_value(full, full.weight());
    float* lw = local->weight().value.data<float>();
    for (int64_t o = 0; o < out; ++o)
        std::memcpy(lw + o * piece, w.data<float>() + o * in + group.rank * piece, sizeof(float) * piece);
    if (full.has_bias()) local->bias().value.copy_from(fp32_value(full, full.bias()));
    copy_names(full, *local);
    return local;
}

Tensor RowParallelLinear::forward(const Tensor& x, RunContext& ctx) {
    Tensor y = Linear::forward(x, ctx);  // x_r w_r^T, no bias (set_bias_in_product(false))
    tp_all_reduce_sum(group_, y);
    if (has_bias()) {
        const int64_t out = out_features(), rows = y.numel() / out;
        const float* b = bias().value.data<float>();
        float* p = y.data<float>();
        for (int64_t r = 0; r < rows; ++r) ctx.kernels.add_inplace(p + r * out, b, static_cast<size_t>(out));
    }
    return y;
}

}  // namespace ds::nn
