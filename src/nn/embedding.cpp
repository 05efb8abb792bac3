#include "nn/embedding.h"

#include <string>

#include "core/error.h"
#include "nn/layer_util.h"

namespace ds::nn {

namespace {

// "[1, 7]": the multi-index of flat element `i` of `shape`.
std::string position(const Shape& shape, int64_t i) {
    Shape idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = shape[d] > 0 ? i % shape[d] : 0;
        i = shape[d] > 0 ? i / shape[d] : 0;
    }
    return shape_to_string(idx);
}

}  // namespace

Embedding::Embedding(int64_t num, int64_t dim) : num_(num), dim_(dim) {
    DS_CHECK(num > 0 && dim > 0, DS_ERR_INVALID_ARGUMENT,
             "Embedding: num_embeddings = %lld and embedding_dim = %lld must be positive",
             static_cast<long long>(num), static_cast<long long>(dim));
    w_.name = "weight";
    w_.shape = {num, dim};
    w_.value = Tensor::zeros(w_.shape, DType::F32, Device::cpu(), Allocator::process(), MemCategory::Params);
    w_.reads_bf16 = true;  // forward widens bf16 rows as it gathers them (gather_bf16)
}

namespace {
// y[i] = fp32(w16[ids[i]]): the row gather of a bf16 table (a bf16 engine's
// working weights, read in place). *bad: the first id outside [0, num), -1 if none.
void gather_bf16(const Tensor& w, const Tensor& ids, int64_t num, int64_t dim, float* y, RunContext& ctx,
                 int64_t* bad) {
    if (!ctx.device.is_cpu()) {
        // On a GPU the ids are read by kernels only. A bf16 row of even width
        // is dim/2 32-bit words: gathered as such (the fp32 gather moves bits,
        // no arithmetic), then widened in one conversion.
        const int64_t n = ids.numel();
        const bool words = dim % 2 == 0 && reinterpret_cast<uintptr_t>(w.data_ptr()) % 4 == 0;
        if (words) {
            Tensor rows = Tensor::empty({n, dim}, DType::BF16, ctx.device, run_allocator(ctx), MemCategory::Buffers);
            ctx.kernels.embedding_fwd(static_cast<const float*>(w.data_ptr()), num, dim / 2, ids.data_ptr(),
                                      static_cast<int>(ids.dtype()), n, static_cast<float*>(rows.data_ptr()), bad);
            ctx.kernels.convert(rows.data_ptr(), DSK_BF16, y, DSK_F32, static_cast<size_t>(n * dim));
        } else {  // odd width or a table at an odd element offset: the fp32 table, then the gather
            Tensor w32 = Tensor::empty({num, dim}, DType::F32, ctx.device, run_allocator(ctx), MemCategory::Buffers);
            ctx.kernels.convert(w.data_ptr(), DSK_BF16, w32.data_ptr(), DSK_F32, static_cast<size_t>(num * dim));
            ctx.kernels.embedding_fwd(w32.data<float>(), num, dim, ids.data_ptr(), static_cast<int>(ids.dtype()), n, y,
                                      bad);
        }
        return;
    }
    const uint16_t* w16 = w.data<uint16_t>();
    const int64_t n = ids.numel();
    for (int64_t i = 0; i < n; ++i) {
        const int64_t id = ids.dtype() == DType::I32 ? ids.data<int32_t>()[i] : ids.data<int64_t>()[i];
        if (id < 0 || id >= num) {
            *bad = i;
            return;
        }
        ctx.kernels.convert(w16 + id * dim, DSK_BF16, y + i * dim, DSK_F32, static_cast<size_t>(dim));
    }
}
}  // namespace

Tensor Embedding::forward(const Tensor& ids, RunContext& ctx) {
    const std::string me = "Embedding '" + name() + "'";
    DS_CHECK(ids.defined(), DS_ERR_INVALID_ARGUMENT, "%s: input ids are undefined", me.c_str());
    DS_CHECK((ids.dtype() == DType::I32 || ids.dtype() == DType::I64) && ids.is_contiguous(), DS_ERR_INVALID_ARGUMENT,
             "%s: input ids must be a contiguous int32 or int64 tensor, got %s", me.c_str(), dtype_name(ids.dtype()));
    check_on_run_device(ids, ctx, me.c_str(), "input ids");
    const Tensor& w = w_.value;
    DS_CHECK(w.defined() && (w.dtype() == DType::F32 || w.dtype() == DType::BF16) && w.is_contiguous() &&
                 w.shape() == w_.shape,
             DS_ERR_INVALID_ARGUMENT, "%s: weight must be contiguous fp32 or bf16 memory of shape %s", me.c_str(),
             shape_to_string(w_.shape).c_str());
    check_on_run_device(w, ctx, me.c_str(), "weight");
    Shape ys = ids.shape();
    ys.push_back(dim_);
    Tensor y = new_activation(ys, ctx);
    int64_t bad = -1;
    try {
        if (w.dtype() == DType::BF16) {
            gather_bf16(w, ids, num_, dim_, y.data<float>(), ctx, &bad);
            if (bad >= 0) fail(DS_ERR_INVALID_ARGUMENT, "token id out of range");  // named below
        } else {
            ctx.kernels.embedding_fwd(w.data<float>(), num_, dim_, ids.data_ptr(), static_cast<int>(ids.dtype()),
                                      ids.numel(), y.data<float>(), &bad);
        }
    } catch (const Error& e) {
        if (bad < 0) throw;
        const long long id = id_element(ids, bad);
        fail(DS_ERR_INVALID_ARGUMENT, "%s: token id %lld at position %s of the input %s is outside [0, %lld)",
             me.c_str(), id, position(ids.shape(), bad).c_str(), shape_to_string(ids.shape()).c_str(),
             static_cast<long long>(num_));
    }
    drop();
    if (ctx.training) {
        saved_ids_ = ids.owns_storage() ? ids : ids.to(ids.dtype(), run_allocator(ctx), MemCategory::Buffers);
        saved_bytes_ = static_cast<int64_t>(ids.nbytes());
        saved_meter_ = ctx.meter;
        if (saved_meter_) saved_meter_->add(saved_bytes_);
    }
    return y;
}

Tensor Embedding::backward(const Tensor& dy, RunContext& ctx) {
    const std::string me = "Embedding '" + name() + "'";
    DS_CHECK(saved_ids_.defined(), DS_ERR_INVALID_STATE, "%s: backward without a training-mode forward (nothing saved)",
             me.c_str());
    Shape ys = saved_ids_.shape();
    ys.push_back(dim_);
    DS_CHECK(dy.defined() && dy.dtype() == DType::F32 && dy.is_contiguous(), DS_ERR_INVALID_ARGUMENT,
             "%s: output gradient must be a contiguous fp32 tensor", me.c_str());
    check_on_run_device(dy, ctx, me.c_str(), "output gradient");
    DS_CHECK(dy.shape() == ys, DS_ERR_INVALID_ARGUMENT, "%s: output gradient has shape %s, the forward produced %s",
             me.c_str(), shape_to_string(dy.shape()).c_str(), shape_to_string(ys).c_str());
    DS_CHECK(w_.grad.defined() && w_.grad.dtype() == DType::F32 && w_.grad.is_contiguous() &&
                 w_.grad.shape() == w_.shape && w_.grad.device() == ctx.device,
             DS_ERR_INVALID_STATE, "%s: weight has no contiguous fp32 gradient buffer of shape %s bound", me.c_str(),
             shape_to_string(w_.shape).c_str());
    ctx.kernels.embedding_bwd(dy.data<float>(), saved_ids_.data_ptr(), static_cast<int>(saved_ids_.dtype()),
                              saved_ids_.numel(), num_, dim_, w_.grad.data<float>());
    drop();
    return Tensor();
}

void Embedding::drop() {
    if (!saved_ids_.defined()) return;
    if (saved_meter_) saved_meter_->sub(saved_bytes_);
    saved_ids_ = Tensor();
    saved_bytes_ = 0;
    saved_meter_ = nullptr;
}

void Embedding::clear_saved() { drop(); }

}  // namespace ds::nn
