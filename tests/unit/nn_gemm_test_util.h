// Shared by the GEMM kernel tests (nn_gemm_test.cpp: fp32 products,
// nn_gemm_bf16_test.cpp: bf16 products): deterministic operands, the GEMM
// engines this build has, one transpose/size/padding case with its operand
// layout, the per-element error bound of an fp32-accumulated dot product, the
// check of C against a float64 reference, and the refusal check.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "nn_gemm.h"

namespace gemm_test {

inline std::vector<float> random_vec(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    return v;
}

// Engines available here; restores the starting engine when destroyed.
struct EngineScope {
    int saved = dsk_cpu_gemm_engine_id();
    ~EngineScope() { dsk_cpu_gemm_set_engine(saved); }
    static std::vector<int> available() {
        std::vector<int> v;
        const int start = dsk_cpu_gemm_engine_id();
        for (int e : {DSK_GEMM_ENGINE_REFERENCE, DSK_GEMM_ENGINE_OPENBLAS, DSK_GEMM_ENGINE_ONEDNN})
            if (dsk_cpu_gemm_set_engine(e) == DSK_OK) v.push_back(e);
        dsk_cpu_gemm_set_engine(start);
        return v;
    }
};

struct Case {
    int ta, tb;
    int64_t m, n, k, pad;  // pad: extra elements per row of every operand
    float alpha, beta;
};

inline std::ostream& operator<<(std::ostream& os, const Case& t) {
    return os << "ta=" << t.ta << " tb=" << t.tb << " m=" << t.m << " n=" << t.n << " k=" << t.k << " pad=" << t.pad
              << " alpha=" << t.alpha << " beta=" << t.beta;
}

// A case's stored operands: A is ra x ca (k x m when transposed), B rb x cb,
// C m x n, each row padded by `pad` (at least 1 wide, for the empty sizes).
struct Layout {
    int64_t ra, ca, rb, cb, lda, ldb, ldc;
    explicit Layout(const Case& t)
        : ra(t.ta ? t.k : t.m),
          ca(t.ta ? t.m : t.k),
          rb(t.tb ? t.n : t.k),
          cb(t.tb ? t.k : t.n),
          lda(std::max<int64_t>(1, ca + t.pad)),
          ldb(std::max<int64_t>(1, cb + t.pad)),
          ldc(std::max<int64_t>(1, t.n + t.pad)) {}
};

// A case's operands A, B and C, random (seeds seed, seed + 1, seed + 2), in its layout.
struct Operands {
    std::vector<float> a, b, c;
    Operands(const Case& t, const Layout& l, uint32_t seed)
        : a(random_vec(static_cast<size_t>(l.ra * l.lda), seed)),
          b(random_vec(static_cast<size_t>(l.rb * l.ldb), seed + 1)),
          c(random_vec(static_cast<size_t>(t.m * l.ldc), seed + 2)) {}
};

// The scale of each element's rounding error: |alpha| * sum_p |a_ip b_pj|
// (over the operands the reference used) + |beta c_ij| (none for beta 0,
// where C may hold NaN that must not be read).
inline std::vector<double> magnitudes(const Case& t, const Layout& l, const std::vector<double>& a,
                                      const std::vector<double>& b, const std::vector<float>& c) {
    std::vector<double> mag(static_cast<size_t>(t.m * l.ldc), 0.0);
    for (int64_t i = 0; i < t.m; ++i)
        for (int64_t j = 0; j < t.n; ++j) {
            double s = 0;
            for (int64_t p = 0; p < t.k; ++p)
                s += std::fabs(a[t.ta ? p * l.lda + i : i * l.lda + p] * b[t.tb ? j * l.ldb + p : p * l.ldb + j]);
            mag[i * l.ldc + j] =
                std::fabs(t.alpha) * s + (t.beta == 0.0f ? 0.0 : std::fabs(t.beta * c[i * l.ldc + j]));
        }
    return mag;
}

// |error| bound of an fp32 dot product of length k (plus the beta term) of
// that magnitude, with a generous constant: a transposed or missing term is
// O(1) off.
inline double tolerance(int64_t k, double mag) { return 8.0 * (static_cast<double>(k) + 2.0) * 6e-8 * mag + 1e-30; }

// Every element of C within tolerance of `want` (float64), the padding
// columns as they were in `before`; the first five problems are reported.
// `reference` names `want` in the messages.
inline void expect_c_matches(const Case& t, const Layout& l, const std::vector<float>& c,
                             const std::vector<float>& before, const std::vector<double>& want,
                             const std::vector<double>& mag, const char* reference) {
    int bad = 0;
    for (int64_t i = 0; i < t.m; ++i)
        for (int64_t j = 0; j < l.ldc; ++j) {
            const size_t idx = static_cast<size_t>(i * l.ldc + j);
            if (j >= t.n) {  // padding
                if (std::memcmp(&c[idx], &before[idx], sizeof(float)) != 0 && bad++ < 5)
                    ADD_FAILURE() << "padding C[" << i << "][" << j << "] was written";
                continue;
            }
            const double tol = tolerance(t.k, mag[idx]);
            if (!(std::fabs(c[idx] - want[idx]) <= tol) && bad++ < 5)
                ADD_FAILURE() << "C[" << i << "][" << j << "] = " << c[idx] << ", " << reference << " " << want[idx]
                              << " (tolerance " << tol << ")";
        }
}

// A call refused with DSK_ERR_INVALID_ARGUMENT and a message containing `needle`.
inline void expect_refused(int status, const char* needle) {
    EXPECT_EQ(status, DSK_ERR_INVALID_ARGUMENT) << needle;
    EXPECT_NE(std::string(dsk_last_error()).find(needle), std::string::npos)
        << "message '" << dsk_last_error() << "' lacks '" << needle << "'";
}

}  // namespace gemm_test
