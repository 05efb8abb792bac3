/*
 * kernels.h — flat compute entry points: pointers, counts, dtype codes.
 * No engine types, no C++ exceptions: every dsk_cpu_* entry point returns a
 * status (DSK_OK, or DSK_ERR_INVALID_ARGUMENT with a message naming the
 * kernel and the argument, readable with dsk_last_error() on the same
 * thread). Results come back through out-parameters. The library calls the
 * kernels through a per-device table (backend.h), the C++ code through
 * ds::Kernels (src/core/kernel_backend.h), which turns a status into ds::Error.
 * Every kernel has a plain scalar twin dsk_ref_* in kernels/ref/ that the
 * tests use as the oracle (no argument checks there).
 *
 * CPU kernels pick their instruction set at run time (dsk_cpu_isa()); the
 * shipped library is never built with -march=native. Files named *_avx2.cpp
 * are compiled with AVX2+FMA+F16C, files named *_avx512.cpp with
 * AVX-512 F/BW/VL/DQ (+FMA, F16C); everything else with the baseline.
 */
#ifndef DS_KERNELS_H
#define DS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "dtype_codes.h"

#ifdef __cplusplus
#define DSK_NOEXCEPT noexcept
#else
#define DSK_NOEXCEPT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- instruction-set dispatch ---------------------------------------- */
#define DSK_ISA_SCALAR 0
#define DSK_ISA_AVX2   1
#define DSK_ISA_AVX512 2

/** Best ISA this CPU (and OS) supports. */
int dsk_cpu_isa_detected(void);
/** ISA the kernels use now: DS_CPU_ISA=scalar|avx2|avx512 (capped at the
 *  detected one) at first use, else the detected one. */
int dsk_cpu_isa(void);
/** Force an ISA (tests, benchmarks). Returns 0, or -1 if the CPU lacks it. */
int dsk_cpu_set_isa(int isa);
/** "scalar", "avx2", "avx512". */
const char* dsk_isa_name(int isa);

/* ---- status ------------------------------------------------------------ */
#define DSK_OK 0
#define DSK_ERR_INVALID_ARGUMENT 1 /* a bad dtype code, NULL pointer or NULL hparams */
#define DSK_ERR_UNSUPPORTED 2      /* an operation a backend does not provide */
#define DSK_ERR_CUDA 3             /* a CUDA runtime call failed (cuda_kernels.h): the message has CUDA's text */
#define DSK_ERR_OUT_OF_MEMORY 4    /* host memory for a kernel's scratch or operand copies could not be had */
#define DSK_ERR_ENGINE 5           /* the GEMM engine (oneDNN) failed for a reason other than the arguments */

/** Message of the last failed dsk_* call on this thread ("" if none). */
const char* dsk_last_error(void) DSK_NOEXCEPT;

/* dtype codes: DSK_F32, DSK_F16, DSK_BF16 (dtype_codes.h). */

/* ---- conversions (round to nearest even; NaN stays NaN, Inf stays Inf) - */
int dsk_f32_to_f16(const float* src, uint16_t* dst, size_t n) DSK_NOEXCEPT;
int dsk_f16_to_f32(const uint16_t* src, float* dst, size_t n) DSK_NOEXCEPT;
int dsk_f32_to_bf16(const float* src, uint16_t* dst, size_t n) DSK_NOEXCEPT;
int dsk_bf16_to_f32(const uint16_t* src, float* dst, size_t n) DSK_NOEXCEPT;
/* Any of F32/F16/BF16 to any; src and dst must not overlap unless equal dtype and pointer. */
int dsk_cpu_convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n) DSK_NOEXCEPT;

uint16_t dsk_ref_f32_to_f16(float x);
float dsk_ref_f16_to_f32(uint16_t h);
uint16_t dsk_ref_f32_to_bf16(float x);
float dsk_ref_bf16_to_f32(uint16_t h);

/* ---- reductions and elementwise --------------------------------------- */
/** *sumsq (nullable) = sum of squares of x (dtype F32/F16/BF16) accumulated in double.
 *  *nonfinite (nullable) is set to 1 if any element is Inf or NaN, else 0. */
int dsk_cpu_sumsq(const void* x, int dtype, size_t n, double* sumsq, int* nonfinite) DSK_NOEXCEPT;
double dsk_ref_sumsq(const void* x, int dtype, size_t n, int* nonfinite);

/** dst[i] = dst[i] + scale * src[i], computed in fp32 and stored in dst's
 *  dtype (round to nearest even). dst/src dtypes F32/F16/BF16. */
int dsk_cpu_axpy(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n) DSK_NOEXCEPT;
void dsk_ref_axpy(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n);

/** One streaming pass: dst[i] = scale * src[i] (overwrite != 0: dst is not
 *  read) or dst[i] + scale * src[i] (as dsk_cpu_axpy), stored in dst's dtype;
 *  *sumsq (nullable) = the sum of squares of the stored dst values (double
 *  accumulation); *nonfinite (nullable) as dsk_cpu_sumsq sets it. */
int dsk_cpu_axpy_sumsq(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, int overwrite,
                       size_t n, double* sumsq, int* nonfinite) DSK_NOEXCEPT;
double dsk_ref_axpy_sumsq(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, int overwrite,
                          size_t n, int* nonfinite);

/* ---- optimizers --------------------------------------------------------
 * Common shape: p is the fp32 master weight; g the gradient in g_dtype,
 * multiplied by grad_scale (the fused unscale x clip factor) as it is read;
 * optional w16 (nullable) receives the updated weight rounded to w_dtype
 * (F16/BF16) in the same pass. All arithmetic is fp32.
 */

/** Adam / AdamW, DeepSpeed CPU-Adam semantics (DEEPSPEED_SEMANTICS.md §2.1):
 *  g *= grad_scale; if wd>0 && !adamw: g += wd*p;
 *  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;
 *  denom = sqrt(v)*bias_correction2_rsqrt + eps;
 *  if wd>0 && adamw: p += (-lr*wd)*p;
 *  p += (-lr/bias_correction1) * m/denom. */
typedef struct dsk_adam_hparams {
    float lr, beta1, beta2, eps, weight_decay;
    float bias_correction1;        /* 1 - beta1^t, or 1 without bias correction */
    float bias_correction2_rsqrt;  /* 1/sqrt(1 - beta2^t), or 1 */
    float grad_scale;
    int32_t adamw_mode;
} dsk_adam_hparams;

/** m, v have state_dtype (F32, or F16/BF16 for fp32_optimizer_states=false). */
int dsk_cpu_adam_step(float* p, const void* g, int g_dtype, void* m, void* v, int state_dtype,
                      void* w16, int w_dtype, size_t n, const dsk_adam_hparams* h) DSK_NOEXCEPT;
void dsk_ref_adam_step(float* p, const void* g, int g_dtype, void* m, void* v, int state_dtype,
                       void* w16, int w_dtype, size_t n, const dsk_adam_hparams* h);

/** LAMB, DeepSpeed FusedLamb semantics (DEEPSPEED_SEMANTICS.md §2.3), one tensor:
 *  pass 1: g *= grad_scale; m, v as Adam; denom = sqrt(v)+eps (or sqrt(v+eps)
 *  when eps_inside_sqrt); u = m/denom + wd*p; accumulate |p|^2, |u|^2;
 *  trust = |p|/|u| clamped to [min_coeff, max_coeff], 1 if either norm is 0;
 *  pass 2: p -= step_size * trust * u with step_size = lr*sqrt(bias_correction2)/bias_correction1.
 *  *trust (nullable) receives the trust ratio used. */
typedef struct dsk_lamb_hparams {
    float lr, beta1, beta2, eps, weight_decay;
    float bias_correction1;  /* 1 - beta1^t, or 1 */
    float bias_correction2;  /* 1 - beta2^t, or 1 */
    float grad_scale;
    float max_coeff, min_coeff;
    int32_t eps_inside_sqrt;
} dsk_lamb_hparams;

int dsk_cpu_lamb_step(float* p, const void* g, int g_dtype, float* m, float* v,
                      void* w16, int w_dtype, size_t n, const dsk_lamb_hparams* h, float* trust) DSK_NOEXCEPT;
float dsk_ref_lamb_step(float* p, const void* g, int g_dtype, float* m, float* v,
                        void* w16, int w_dtype, size_t n, const dsk_lamb_hparams* h);

/** SGD, torch.optim.SGD semantics: g *= grad_scale; g += wd*p;
 *  if momentum != 0: buf = first_step ? g : momentum*buf + (1-dampening)*g;
 *  g = nesterov ? g + momentum*buf : buf;  p -= lr*g.
 *  buf may be NULL when momentum == 0. */
typedef struct dsk_sgd_hparams {
    float lr, momentum, dampening, weight_decay, grad_scale;
    int32_t nesterov;
    int32_t first_step;  /* 1: the momentum buffer is initialised to g */
} dsk_sgd_hparams;

int dsk_cpu_sgd_step(float* p, const void* g, int g_dtype, float* buf,
                     void* w16, int w_dtype, size_t n, const dsk_sgd_hparams* h) DSK_NOEXCEPT;
void dsk_ref_sgd_step(float* p, const void* g, int g_dtype, float* buf,
                      void* w16, int w_dtype, size_t n, const dsk_sgd_hparams* h);

/** Lion (DEEPSPEED_SEMANTICS.md §2.5): g *= grad_scale; c = b1*m + (1-b1)*g;
 *  if wd>0: p *= 1 - lr*wd;  p -= lr*sign(c) (sign(0) = 0);  m = b2*m + (1-b2)*g. */
typedef struct dsk_lion_hparams {
    float lr, beta1, beta2, weight_decay, grad_scale;
} dsk_lion_hparams;

int dsk_cpu_lion_step(float* p, const void* g, int g_dtype, float* m,
                      void* w16, int w_dtype, size_t n, const dsk_lion_hparams* h) DSK_NOEXCEPT;
void dsk_ref_lion_step(float* p, const void* g, int g_dtype, float* m,
                       void* w16, int w_dtype, size_t n, const dsk_lion_hparams* h);

/* ---- scaling --------------------------------------------------------- */
/** x[i] = x[i] * s, computed in fp32 and stored in x's dtype (round to
 *  nearest even). F32/F16/BF16. */
int dsk_cpu_scale(void* x, int dtype, float s, size_t n) DSK_NOEXCEPT;
void dsk_ref_scale(void* x, int dtype, float s, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* DS_KERNELS_H */
