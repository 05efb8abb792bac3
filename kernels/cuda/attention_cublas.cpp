// AttnCublasProducts (attention_cublas.h) and the products' setting.
#include "attention_cublas.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "attention_cublas_plan.h"
#include "cublas_gemm.h"
#include "cuda_check.h"
#include "scratch_pool.h"

namespace ds::kernels::cu {

namespace {

std::atomic<int> g_products{DSK_CUDA_ATTENTION_CUBLAS};
std::once_flag g_env_once;

// DS_CUDA_ATTENTION=cublas|tiled, read at first use.
int products() {
    std::call_once(g_env_once, [] {
        const char* want = std::getenv("DS_CUDA_ATTENTION");
        if (want != nullptr && std::strcmp(want, "tiled") == 0) g_products.store(DSK_CUDA_ATTENTION_TILED);
        if (want != nullptr && std::strcmp(want, "cublas") == 0) g_products.store(DSK_CUDA_ATTENTION_CUBLAS);
    });
    return g_products.load(std::memory_order_relaxed);
}

}  // namespace

bool attention_products_on_cublas() { return products() == DSK_CUDA_ATTENTION_CUBLAS; }

AttnCublasProducts::~AttnCublasProducts() {
    for (const Copy& c : copies_) scratch_free(c.dst, stream_);
}

int AttnCublasProducts::prime(const float* src, int64_t n) {
    const uint16_t* unused = nullptr;
    return bf16_of(src, n, &unused);
}

int AttnCublasProducts::fresh_copy(const float* src, int64_t n, uint16_t** dst) {
    written(src, n);
    return add_copy(src, n, dst);
}

// Copies may overlap (one made for a range no copy covered whole): only a
// write drops them, so a pointer handed out earlier in a product stays valid.
int AttnCublasProducts::add_copy(const float* src, int64_t n, uint16_t** dst) {
    void* p = nullptr;
    if (int s = scratch_alloc(kernel_, "bf16 copy of an attention operand", &p, static_cast<size_t>(n) * sizeof(uint16_t),
                              stream_);
        s != DSK_OK)
        return s;
    copies_.push_back(Copy{src, n, static_cast<uint16_t*>(p)});
    *dst = static_cast<uint16_t*>(p);
    return DSK_OK;
}

int AttnCublasProducts::bf16_of(const float* src, int64_t n, const uint16_t** out) {
    for (const Copy& c : copies_)
        if (src >= c.src && src + n <= c.src + c.n) {
            *out = c.dst + (src - c.src);
            return DSK_OK;
        }
    uint16_t* dst = nullptr;
    if (int s = add_copy(src, n, &dst); s != DSK_OK) return s;
    if (int s = dsk_cuda_convert(src, DSK_F32, dst, DSK_BF16, static_cast<size_t>(n), stream_); s != DSK_OK) return s;
    *out = dst;
    return DSK_OK;
}

void AttnCublasProducts::written(const float* p, int64_t n) {
    for (size_t i = copies_.size(); i-- > 0;) {
        const Copy& c = copies_[i];
        if (c.src < p + n && p < c.src + c.n) {
            scratch_free(c.dst, stream_);
            copies_.erase(copies_.begin() + static_cast<std::ptrdiff_t>(i));
        }
    }
}

int AttnCublasProducts::gemm(const AttnGemm& g, const AttnCublasCalls& r) {
    written(g.c, attn_span_c(g));
    const char* a = reinterpret_cast<const char*>(g.a);
    const char* b = reinterpret_cast<const char*>(g.b);
    cudaDataType type = CUDA_R_32F;
    size_t es = sizeof(float);
    if (g.bf16) {
        const uint16_t *a16 = nullptr, *b16 = nullptr;
        if (int s = bf16_of(g.a, attn_span_a(g), &a16); s != DSK_OK) return s;
        if (int s = bf16_of(g.b, attn_span_b(g), &b16); s != DSK_OK) return s;
        a = reinterpret_cast<const char*>(a16), b = reinterpret_cast<const char*>(b16);
        type = CUDA_R_16BF, es = sizeof(uint16_t);
    }
    for (int64_t i = 0; i < r.calls; ++i) {
        gemm::Problem p = r.p;
        p.c = g.c + i * r.c_step;
        const void* ai = a + static_cast<size_t>(i * r.a_step) * es;
        const void* bi = b + static_cast<size_t>(i * r.b_step) * es;
        if (int s = device_gemm(kernel_, p, ai, bi, type, stream_); s != DSK_OK) return s;
    }
    return DSK_OK;
}

}  // namespace ds::kernels::cu

extern "C" int dsk_cuda_attention_products(void) noexcept {
    return ds::kernels::cu::attention_products_on_cublas() ? DSK_CUDA_ATTENTION_CUBLAS : DSK_CUDA_ATTENTION_TILED;
}

extern "C" int dsk_cuda_attention_set_products(int products) noexcept {
    if (products != DSK_CUDA_ATTENTION_CUBLAS && products != DSK_CUDA_ATTENTION_TILED)
        return ds::kernels::set_last_error(DSK_ERR_INVALID_ARGUMENT,
                                           "dsk_cuda_attention_set_products: products=%d is not "
                                           "DSK_CUDA_ATTENTION_CUBLAS (%d) or DSK_CUDA_ATTENTION_TILED (%d)",
                                           products, DSK_CUDA_ATTENTION_CUBLAS, DSK_CUDA_ATTENTION_TILED);
    ds::kernels::cu::attention_products_on_cublas();  // the environment is read first: it cannot override this later
    ds::kernels::cu::g_products.store(products);
    return DSK_OK;
}
