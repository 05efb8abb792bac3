/* ds_convert against an independent reference: 16-bit formats decoded with
 * a float64 formula, and fp32 -> 16-bit rounding found by searching the
 * nearest representable value in float64 (ties to the even pattern,
 * overflow to Inf). Covers every fp16 and bf16 pattern, NaN, Inf,
 * subnormals, exact ties, random fp32 bit patterns, misaligned buffers and
 * the argument errors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensor_util.h"

typedef struct {
    int man_bits, exp_bits, bias;
    uint8_t code;
} fmt_t;

static const fmt_t kF16 = {10, 5, 15, kDLFloat};
static const fmt_t kBF16 = {7, 8, 127, kDLBfloat};

static uint16_t max_finite(const fmt_t* f) {
    return (uint16_t)((((1u << f->exp_bits) - 2u) << f->man_bits) | ((1u << f->man_bits) - 1u));
}
static uint16_t inf_bits(const fmt_t* f) { return (uint16_t)(((1u << f->exp_bits) - 1u) << f->man_bits); }

/* Value of a non-negative finite pattern, by formula. */
static double decode(const fmt_t* f, uint16_t h) {
    const unsigned e = (h >> f->man_bits) & ((1u << f->exp_bits) - 1u);
    const unsigned m = h & ((1u << f->man_bits) - 1u);
    const double sign = (h & 0x8000u) ? -1.0 : 1.0;
    if (e == (1u << f->exp_bits) - 1u) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * ldexp((double)m, 1 - f->bias - f->man_bits);
    return sign * ldexp(1.0 + ldexp((double)m, -f->man_bits), (int)e - f->bias);
}

/* Round x (finite or not) to the format: nearest, ties to even, overflow to Inf. */
static uint16_t reference_round(const fmt_t* f, double x) {
    const uint16_t sign = signbit(x) ? 0x8000u : 0u;
    const double a = fabs(x);
    uint16_t lo = 0, hi = max_finite(f), p;
    double top, vlo, vhi;
    if (isnan(x)) return (uint16_t)(inf_bits(f) | 1u); /* any NaN: checked as NaN */
    /* The value one ulp above the largest finite one (where Inf begins to win). */
    top = ldexp(1.0, (1 << (f->exp_bits - 1)));
    if (a >= top) return (uint16_t)(sign | inf_bits(f));
    /* Largest pattern p with decode(p) <= a (non-negative patterns are monotone). */
    while (lo < hi) {
        uint16_t mid = (uint16_t)(lo + (hi - lo + 1) / 2);
        if (decode(f, mid) <= a) lo = mid;
        else hi = (uint16_t)(mid - 1);
    }
    p = lo;
    vlo = decode(f, p);
    vhi = p == max_finite(f) ? top : decode(f, (uint16_t)(p + 1));
    if (a - vlo < vhi - a) return (uint16_t)(sign | p);
    if (a - vlo > vhi - a) return (uint16_t)(sign | (p == max_finite(f) ? inf_bits(f) : p + 1));
    return (uint16_t)(sign | ((p & 1u) ? (p == max_finite(f) ? inf_bits(f) : p + 1) : p)); /* tie: even */
}

static int is_nan16(const fmt_t* f, uint16_t h) {
    return ((h & 0x7FFFu) & inf_bits(f)) == inf_bits(f) && (h & ((1u << f->man_bits) - 1u)) != 0;
}

static DLTensor vec(void* data, int64_t* n, uint8_t code, uint8_t bits) { return make_tensor(data, 1, n, code, bits); }

static int64_t g_bad = 0;

/* Every 16-bit pattern -> fp32 must be exact; then back must be the identity (NaN stays NaN). */
static void all_patterns(const fmt_t* f) {
    static uint16_t h[65536], back[65536];
    static float x[65536];
    int64_t n = 65536;
    DLTensor th = vec(h, &n, f->code, 16), tx = vec(x, &n, kDLFloat, 32), tb = vec(back, &n, f->code, 16);
    int64_t i;
    for (i = 0; i < n; ++i) h[i] = (uint16_t)i;
    EXPECT_OK(ds_convert(&th, &tx));
    EXPECT_OK(ds_convert(&tx, &tb));
    for (i = 0; i < n; ++i) {
        const double want = decode(f, h[i]);
        if (is_nan16(f, h[i])) {
            if (!isnan(x[i]) || !is_nan16(f, back[i])) ++g_bad;
        } else if ((double)x[i] != want || !signbit(x[i]) != !signbit(want) || back[i] != h[i]) {
            if (g_bad++ < 5) fprintf(stderr, "pattern 0x%04x: got %.9g / 0x%04x\n", h[i], x[i], back[i]);
        }
    }
}

static void check_f32_inputs(const fmt_t* f, const float* in, int64_t n) {
    uint16_t* out = (uint16_t*)malloc((size_t)n * 2);
    DLTensor ti = vec((void*)in, &n, kDLFloat, 32), to = vec(out, &n, f->code, 16);
    int64_t i;
    EXPECT_OK(ds_convert(&ti, &to));
    for (i = 0; i < n; ++i) {
        const uint16_t want = reference_round(f, (double)in[i]);
        const int ok = isnan(in[i]) ? is_nan16(f, out[i]) : out[i] == want;
        if (!ok && g_bad++ < 5)
            fprintf(stderr, "%s: %.9g (0x%08x) -> 0x%04x, want 0x%04x\n", f == &kF16 ? "fp16" : "bf16",
                    in[i], 0u, out[i], want);
    }
    free(out);
}

static uint32_t g_rng = 12345u;
static uint32_t next_u32(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 17;
    g_rng ^= g_rng << 5;
    return g_rng;
}

static void f32_to_16(const fmt_t* f) {
    enum { kRandom = 200000, kTies = 2 * 65536 };
    float* in = (float*)malloc(sizeof(float) * (kRandom + kTies + 16));
    int64_t n = 0, i;
    for (i = 0; i < kRandom; ++i) {
        uint32_t b = next_u32();
        memcpy(&in[n++], &b, 4);
    }
    /* Exact midpoints between neighbours (ties) and just above them, where fp32 can hold them. */
    for (i = 0; i < max_finite(f); ++i) {
        const double mid = 0.5 * (decode(f, (uint16_t)i) + decode(f, (uint16_t)(i + 1)));
        const float m = (float)mid;
        if ((double)m == mid) {
            in[n++] = m;
            in[n++] = -nextafterf(m, INFINITY);
        }
        if (n >= kRandom + kTies) break;
    }
    in[n++] = INFINITY;
    in[n++] = -INFINITY;
    in[n++] = NAN;
    in[n++] = 0.0f;
    in[n++] = -0.0f;
    in[n++] = 1e-45f;            /* fp32 subnormal */
    in[n++] = -1.17549421e-38f;  /* largest fp32 subnormal */
    in[n++] = 65504.0f;          /* fp16 max */
    in[n++] = 65519.99f;         /* rounds to fp16 max */
    in[n++] = 65520.0f;          /* tie at the top: Inf */
    in[n++] = 3.3895314e38f;     /* bf16 max */
    in[n++] = 3.40282347e38f;    /* fp32 max: bf16 Inf */
    in[n++] = 5.9604645e-08f;    /* fp16 smallest subnormal */
    in[n++] = 2.9802322e-08f;    /* half of it: tie to 0 */
    check_f32_inputs(f, in, n);
    free(in);
}

/* fp16 <-> bf16 directly equals going through the reference (fp16 is exact in fp32 and double). */
static void f16_bf16(void) {
    static uint16_t h[65536], b[65536];
    int64_t n = 65536, i;
    DLTensor th = vec(h, &n, kDLFloat, 16), tb = vec(b, &n, kDLBfloat, 16);
    for (i = 0; i < n; ++i) h[i] = (uint16_t)i;
    EXPECT_OK(ds_convert(&th, &tb));
    for (i = 0; i < n; ++i) {
        const double v = decode(&kF16, h[i]);
        const int ok = isnan(v) ? is_nan16(&kBF16, b[i]) : b[i] == reference_round(&kBF16, v);
        if (!ok) ++g_bad;
    }
}

static void misaligned_and_errors(void) {
    static unsigned char src_buf[4 * 9000 + 8], dst_buf[2 * 9000 + 8];
    int64_t n = 9000, i, n2[2] = {3, 3}, st[2] = {1, 3}, other = 8999;
    DLTensor ts = vec(src_buf + 1, &n, kDLFloat, 32), td = vec(dst_buf, &n, kDLBfloat, 16);
    float v;
    uint16_t o;
    td.byte_offset = 3; /* data + 3: misaligned for 2-byte elements */
    for (i = 0; i < n; ++i) {
        v = (float)i * 0.37f - 100.0f;
        memcpy(src_buf + 1 + 4 * i, &v, 4);
    }
    EXPECT_OK(ds_convert(&ts, &td));
    for (i = 0; i < n; ++i) {
        memcpy(&v, src_buf + 1 + 4 * i, 4);
        memcpy(&o, dst_buf + 3 + 2 * i, 2);
        if (o != reference_round(&kBF16, v)) ++g_bad;
    }

    td = vec(dst_buf, &other, kDLBfloat, 16);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_convert(&ts, &td), "dst.shape = [8999]", "[9000]");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_convert(NULL, &td), "src");
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_convert(&ts, NULL), "dst");
    td = vec(dst_buf, &n, kDLInt, 16);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_convert(&ts, &td), "dst.dtype");
    td = vec(src_buf + 1 + 8, &n, kDLFloat, 16); /* inside src */
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_convert(&ts, &td), "overlap");
    ts = make_tensor(src_buf, 2, n2, kDLFloat, 32);
    ts.strides = st; /* column-major */
    td = make_tensor(dst_buf, 2, n2, kDLFloat, 16);
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_convert(&ts, &td), "src.strides", "contiguous");
    ts.strides = NULL;
    td.device.device_type = kDLCUDA; /* host src, device dst: one device only */
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_convert(&ts, &td), "dst.device = cuda:0: expected cpu");
    td.device.device_type = kDLCPU;
    ts.device.device_type = (DLDeviceType)3; /* kDLCUDAHost is not taken */
    EXPECT_STATUS(DS_ERR_INVALID_ARGUMENT, ds_convert(&ts, &td), "src.device");
    if (strstr(ds_build_info(), "\"cuda\":false") != NULL) {
        /* Both on a GPU: a build without CUDA says so. (With CUDA, tests/gpu
         * converts real device memory; host pointers must not reach a kernel.) */
        ts.device.device_type = kDLCUDA;
        td.device.device_type = kDLCUDA;
        EXPECT_STATUS(DS_ERR_UNSUPPORTED, ds_convert(&ts, &td), "src.device = cuda:0", "DS_WITH_CUDA=ON");
    }
}

int main(void) {
    all_patterns(&kF16);
    all_patterns(&kBF16);
    f32_to_16(&kF16);
    f32_to_16(&kBF16);
    f16_bf16();
    misaligned_and_errors();
    CHECK(g_bad == 0);
    if (g_bad) fprintf(stderr, "%lld mismatches against the reference\n", (long long)g_bad);
    return ds_test_finish();
}
