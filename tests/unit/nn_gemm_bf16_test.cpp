// The bf16 matrix products (kernels/nn_gemm.h: dsk_cpu_gemm_bf16,
// dsk_cpu_linear_fwd_bf16) and Linear in bf16 mode, on every GEMM engine
// this build has (oneDNN's native bf16 matmul where the CPU has one, the
// rounded-fp32 fallback on the others), against a float64 triple loop over
// the bf16-rounded inputs. The products must also differ from the unrounded
// fp32 ones (the rounding really happens), bad arguments are refused with a
// message naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
#include "catch_error.h"
#include "core/kernel_backend.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn_gemm.h"
#include "nn_gemm_test_util.h"

namespace {

using namespace gemm_test;  // random_vec, EngineScope, Case, Layout, magnitudes, tolerance, expect_c_matches
using ds::DType;
using ds::Tensor;

// The value bf16 rounding (nearest even) gives x, as double.
double bf16(float x) { return dsk_ref_bf16_to_f32(dsk_ref_f32_to_bf16(x)); }

std::vector<double> to_double(const std::vector<float>& v, bool round) {
    std::vector<double> d(v.size());
    for (size_t i = 0; i < v.size(); ++i) d[i] = round ? bf16(v[i]) : v[i];
    return d;
}

// One case: C against the float64 product of the bf16-rounded inputs (within
// fp32 accumulation error), and against the unrounded product (it must be
// off by more than that somewhere: the inputs were rounded).
void check_case(const Case& t, uint32_t seed) {
    SCOPED_TRACE(testing::Message() << t);
    const Layout l(t);
    const int64_t lda = l.lda, ldb = l.ldb, ldc = l.ldc;
    auto [a, b, c] = Operands(t, l, seed);
    std::vector<double> cr(c.begin(), c.end()), cu(c.begin(), c.end());
    const auto ar = to_double(a, true), br = to_double(b, true), au = to_double(a, false), bu = to_double(b, false);
    dsk_ref_gemm_f64(t.ta, t.tb, t.m, t.n, t.k, t.alpha, ar.data(), lda, br.data(), ldb, t.beta, cr.data(), ldc);
    dsk_ref_gemm_f64(t.ta, t.tb, t.m, t.n, t.k, t.alpha, au.data(), lda, bu.data(), ldb, t.beta, cu.data(), ldc);
    const std::vector<double> mag = magnitudes(t, l, ar, br, c);
    const std::vector<float> before = c;
    ASSERT_EQ(dsk_cpu_gemm_bf16(t.ta, t.tb, t.m, t.n, t.k, t.alpha, a.data(), lda, b.data(), ldb, t.beta, c.data(),
                                ldc),
              DSK_OK)
        << dsk_last_error();
    expect_c_matches(t, l, c, before, cr, mag, "float64 over bf16 inputs");
    double max_off_unrounded = 0;
    for (int64_t i = 0; i < t.m; ++i)
        for (int64_t j = 0; j < t.n; ++j) {
            const size_t idx = static_cast<size_t>(i * ldc + j);
            max_off_unrounded =
                std::max(max_off_unrounded, std::fabs(c[idx] - cu[idx]) / (tolerance(t.k, mag[idx]) + 1e-300));
        }
    EXPECT_GT(max_off_unrounded, 1.0) << "C equals the fp32 product: the inputs were not rounded to bf16";
}

}  // namespace

TEST(NnGemmBf16, AllTransposesOnEveryEngine) {
    EngineScope scope;
    std::printf("native bf16 matmul here: %s\n", dsk_cpu_gemm_bf16_native() ? "yes" : "no (rounded fp32 fallback)");
    const int64_t dims[][3] = {{1, 1, 7}, {7, 5, 3}, {17, 33, 65}, {64, 48, 130}, {130, 70, 33}};
    for (int e : EngineScope::available()) {
        ASSERT_EQ(dsk_cpu_gemm_set_engine(e), DSK_OK);
        SCOPED_TRACE(dsk_cpu_gemm_engine());
        uint32_t seed = 11;
        for (const auto& d : dims)
            for (int ta : {0, 1})
                for (int tb : {0, 1}) {
                    check_case({ta, tb, d[0], d[1], d[2], 0, 1.0f, 0.0f}, seed++);
                    check_case({ta, tb, d[0], d[1], d[2], 3, -0.5f, 1.0f}, seed++);
                }
    }
}

TEST(NnGemmBf16, LinearForwardOnEveryEngine) {
    EngineScope scope;
    const int64_t rows = 37, in = 45, out = 29;
    auto x = random_vec(rows * in, 1), w = random_vec(out * in, 2), bias = random_vec(out, 3);
    for (int e : EngineScope::available()) {
        ASSERT_EQ(dsk_cpu_gemm_set_engine(e), DSK_OK);
        SCOPED_TRACE(dsk_cpu_gemm_engine());
        for (bool with_bias : {false, true}) {
            std::vector<float> y(rows * out, std::numeric_limits<float>::quiet_NaN());
            ASSERT_EQ(dsk_cpu_linear_fwd_bf16(x.data(), w.data(), with_bias ? bias.data() : nullptr, y.data(), rows,
                                              in, out),
                      DSK_OK)
                << dsk_last_error();
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < out; ++j) {
                    double s = 0, mag = 0;
                    for (int64_t p = 0; p < in; ++p) {
                        s += bf16(x[r * in + p]) * bf16(w[j * in + p]);
                        mag += std::fabs(bf16(x[r * in + p]) * bf16(w[j * in + p]));
                    }
                    if (with_bias) s += bias[j];  // fp32 bias, not rounded
                    ASSERT_NEAR(y[r * out + j], s, 8.0 * (in + 2) * 6e-8 * (mag + 1.0))
                        << "row " << r << " col " << j << " bias " << with_bias;
                }
        }
    }
}

TEST(NnGemmBf16, LinearBackwardOnEveryEngine) {
    EngineScope scope;
    // rows * (in + out) past the one-thread size; then dy past the 2^20
    // elements above which the kernel works in blocks of rows (3 here, the
    // last of 2 rows), dw summing the blocks.
    const int64_t shapes[2][3] = {{300, 45, 29}, {700, 6, 3000}};
    for (const auto& shape : shapes) {
    const int64_t rows = shape[0], in = shape[1], out = shape[2];
    SCOPED_TRACE("rows " + std::to_string(rows) + " out " + std::to_string(out));
    auto dy = random_vec(rows * out, 8), x = random_vec(rows * in, 9), w = random_vec(out * in, 10);
    for (int e : EngineScope::available()) {
        ASSERT_EQ(dsk_cpu_gemm_set_engine(e), DSK_OK);
        SCOPED_TRACE(dsk_cpu_gemm_engine());
        for (bool with_bias : {false, true}) {
            std::vector<float> dx(rows * in, std::numeric_limits<float>::quiet_NaN()), dw(out * in, 0.5f),
                db(out, -1.0f);
            ASSERT_EQ(dsk_cpu_linear_bwd_bf16(dy.data(), x.data(), w.data(), dx.data(), dw.data(),
                                              with_bias ? db.data() : nullptr, rows, in, out),
                      DSK_OK)
                << dsk_last_error();
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t p = 0; p < in; ++p) {
                    double s = 0, mag = 0;
                    for (int64_t j = 0; j < out; ++j) {
                        s += bf16(dy[r * out + j]) * bf16(w[j * in + p]);
                        mag += std::fabs(bf16(dy[r * out + j]) * bf16(w[j * in + p]));
                    }
                    ASSERT_NEAR(dx[r * in + p], s, 8.0 * (out + 2) * 6e-8 * (mag + 1e-3)) << "dx " << r << "," << p;
                }
            for (int64_t j = 0; j < out; ++j) {
                for (int64_t p = 0; p < in; ++p) {
                    double s = 0.5, mag = 0.5;
                    for (int64_t r = 0; r < rows; ++r) {
                        s += bf16(dy[r * out + j]) * bf16(x[r * in + p]);
                        mag += std::fabs(bf16(dy[r * out + j]) * bf16(x[r * in + p]));
                    }
                    ASSERT_NEAR(dw[j * in + p], s, 8.0 * (rows + 2) * 6e-8 * mag) << "dw " << j << "," << p;
                }
                double sb = -1.0;
                for (int64_t r = 0; r < rows; ++r) sb += dy[r * out + j];  // fp32 dy, not rounded
                ASSERT_NEAR(db[j], with_bias ? sb : -1.0, 1e-5 * (1.0 + rows / 300.0)) << "db " << j;
            }
        }
    }
    }
    float a[4] = {}, d[4] = {};
    EXPECT_EQ(dsk_cpu_linear_bwd_bf16(a, a, a, d, d, nullptr, -1, 2, 2), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("negative size"), std::string::npos) << dsk_last_error();
    EXPECT_EQ(dsk_cpu_linear_bwd_bf16(a, nullptr, a, d, d, nullptr, 2, 1, 2), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("x is NULL"), std::string::npos) << dsk_last_error();
    EXPECT_EQ(dsk_cpu_linear_bwd_bf16(a, a, a, d, nullptr, nullptr, 2, 1, 2), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("dw is NULL"), std::string::npos) << dsk_last_error();
    EXPECT_NE(dsk_backend_cpu()->linear_bwd_bf16, nullptr);
}

// Linear with ctx.matmul_dtype = BF16: y, dx and dW are the products of the
// bf16-rounded x, w and dy; the bias and its gradient stay fp32.
TEST(NnGemmBf16, LinearLayerInBf16Mode) {
    const int64_t rows = 6, in = 9, out = 5;
    ds::nn::Linear lin(in, out, true);
    auto x = random_vec(rows * in, 4), w = random_vec(out * in, 5), b = random_vec(out, 6), dy = random_vec(rows * out, 7);
    std::memcpy(lin.weight().value.data<float>(), w.data(), w.size() * 4);
    std::memcpy(lin.bias().value.data<float>(), b.data(), b.size() * 4);
    for (ds::nn::Param* p : {&lin.weight(), &lin.bias()})
        p->grad = Tensor::zeros(p->shape, DType::F32, ds::Device::cpu(), ds::Allocator::process(), ds::MemCategory::Grads);
    Tensor xt = Tensor::empty({rows, in}, DType::F32, ds::Device::cpu(), ds::Allocator::process(),
                              ds::MemCategory::Buffers);
    std::memcpy(xt.data<float>(), x.data(), x.size() * 4);
    Tensor dyt = Tensor::empty({rows, out}, DType::F32, ds::Device::cpu(), ds::Allocator::process(),
                               ds::MemCategory::Buffers);
    std::memcpy(dyt.data<float>(), dy.data(), dy.size() * 4);
    ds::nn::RunContext ctx;
    ctx.matmul_dtype = DType::BF16;
    Tensor y = lin.forward(xt, ctx);
    Tensor dx = lin.backward(dyt, ctx);
    const double tol = 5e-6;  // fp32 accumulation of <= 9 products of magnitude <= 1
    bool any_rounding_visible = false;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < out; ++j) {
            double s = b[j], u = b[j];
            for (int64_t p = 0; p < in; ++p) {
                s += bf16(x[r * in + p]) * bf16(w[j * in + p]);
                u += static_cast<double>(x[r * in + p]) * w[j * in + p];
            }
            ASSERT_NEAR(y.data<float>()[r * out + j], s, tol) << "y[" << r << "][" << j << "]";
            any_rounding_visible |= std::fabs(y.data<float>()[r * out + j] - u) > tol;
        }
    EXPECT_TRUE(any_rounding_visible) << "y equals the fp32 product: bf16 mode had no effect";
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t p = 0; p < in; ++p) {
            double s = 0;
            for (int64_t j = 0; j < out; ++j) s += bf16(dy[r * out + j]) * bf16(w[j * in + p]);
            ASSERT_NEAR(dx.data<float>()[r * in + p], s, tol) << "dx[" << r << "][" << p << "]";
        }
    for (int64_t j = 0; j < out; ++j) {
        double db = 0;
        for (int64_t r = 0; r < rows; ++r) db += dy[r * out + j];
        ASSERT_NEAR(lin.bias().grad.data<float>()[j], db, tol) << "db[" << j << "]";
        for (int64_t p = 0; p < in; ++p) {
            double s = 0;
            for (int64_t r = 0; r < rows; ++r) s += bf16(dy[r * out + j]) * bf16(x[r * in + p]);
            ASSERT_NEAR(lin.weight().grad.data<float>()[j * in + p], s, tol) << "dW[" << j << "][" << p << "]";
        }
    }
}

TEST(NnGemmBf16, BadArgumentsAreRefusedWithAMessage) {
    float a[16] = {}, b[16] = {}, c[16] = {};
    expect_refused(dsk_cpu_gemm_bf16(2, 0, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2), "trans_a = 2");
    expect_refused(dsk_cpu_gemm_bf16(0, 0, -2, 2, 2, 1, a, 2, b, 2, 0, c, 2), "m = -2");
    expect_refused(dsk_cpu_gemm_bf16(0, 0, 2, 2, 3, 1, a, 2, b, 2, 0, c, 2), "lda = 2");
    expect_refused(dsk_cpu_gemm_bf16(0, 0, 2, 3, 2, 1, a, 2, b, 3, 0, c, 2), "ldc = 2");
    expect_refused(dsk_cpu_gemm_bf16(0, 0, 2, 2, 2, 1, nullptr, 2, b, 2, 0, c, 2), "a is NULL");
    expect_refused(dsk_cpu_gemm_bf16(0, 0, 2, 2, 2, 1, a, 2, nullptr, 2, 0, c, 2), "b is NULL");
    expect_refused(dsk_cpu_gemm_bf16(0, 0, 2, 2, 2, 1, a, 2, b, 2, 0, nullptr, 2), "c is NULL");
    expect_refused(dsk_cpu_linear_fwd_bf16(a, b, nullptr, c, -1, 2, 2), "negative size");
    expect_refused(dsk_cpu_linear_fwd_bf16(a, nullptr, nullptr, c, 2, 2, 2), "w is NULL");
    expect_refused(dsk_cpu_linear_fwd_bf16(a, b, nullptr, c, INT64_MAX / 2, 4, 2), "too large");
    EXPECT_EQ(dsk_cpu_gemm_bf16(0, 0, 0, 0, 0, 1, nullptr, 1, nullptr, 1, 0, nullptr, 1), DSK_OK);
    const dsk_backend* t = dsk_backend_cpu();
    EXPECT_NE(t->gemm_bf16, nullptr);
    EXPECT_NE(t->linear_fwd_bf16, nullptr);
    ds::Error err = catch_error([&] { ds::cpu_kernels().gemm_bf16(false, false, 2, 2, 3, 1, a, 2, b, 2, 0, c, 2); });
    EXPECT_EQ(err.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(err.what()).find("lda = 2"), std::string::npos) << err.what();
}

// ---------------------------------------------------------------- bf16 weights read in place

namespace {

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = dsk_ref_f32_to_bf16(v[i]);
    return h;
}

std::vector<float> widened(const std::vector<uint16_t>& h) {
    std::vector<float> v(h.size());
    for (size_t i = 0; i < h.size(); ++i) v[i] = dsk_ref_bf16_to_f32(h[i]);
    return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

// dsk_cpu_linear_{fwd,bwd}_bf16w read w as bf16 (a bf16 engine's working
// weights, no fp32 copy): against the float64 products of the rounded x, dy
// and the bf16 w, and bit-identical to the fp32-weight kernels on the
// widened w (the same products: what the engine ran before it read its bf16
// weights in place). Both shapes of LinearBackwardOnEveryEngine (one block
// of rows, three blocks), every GEMM engine.
TEST(NnGemmBf16, LinearWithBf16WeightsOnEveryEngine) {
    EngineScope scope;
    const int64_t shapes[2][3] = {{300, 45, 29}, {700, 6, 3000}};
    for (const auto& shape : shapes) {
        const int64_t rows = shape[0], in = shape[1], out = shape[2];
        SCOPED_TRACE("rows " + std::to_string(rows) + " out " + std::to_string(out));
        auto x = random_vec(rows * in, 21), dy = random_vec(rows * out, 22), bias = random_vec(out, 23);
        const std::vector<uint16_t> w16 = to_bf16(random_vec(out * in, 24));
        const std::vector<float> w = widened(w16);  // exactly the bf16 values
        for (int e : EngineScope::available()) {
            ASSERT_EQ(dsk_cpu_gemm_set_engine(e), DSK_OK);
            SCOPED_TRACE(dsk_cpu_gemm_engine());
            std::vector<float> y(rows * out), y_ref(rows * out);
            ASSERT_EQ(dsk_cpu_linear_fwd_bf16w(x.data(), w16.data(), bias.data(), y.data(), rows, in, out), DSK_OK)
                << dsk_last_error();
            ASSERT_EQ(dsk_cpu_linear_fwd_bf16(x.data(), w.data(), bias.data(), y_ref.data(), rows, in, out), DSK_OK);
            EXPECT_TRUE(same_bits(y, y_ref)) << "forward differs from the fp32-weight kernel on the same values";
            std::vector<float> dx(rows * in), dw(out * in, 0.25f), db(out, 0.5f);
            std::vector<float> dx_ref(rows * in), dw_ref(out * in, 0.25f), db_ref(out, 0.5f);
            ASSERT_EQ(dsk_cpu_linear_bwd_bf16w(dy.data(), x.data(), w16.data(), dx.data(), dw.data(), db.data(), rows,
                                               in, out),
                      DSK_OK)
                << dsk_last_error();
            ASSERT_EQ(dsk_cpu_linear_bwd_bf16(dy.data(), x.data(), w.data(), dx_ref.data(), dw_ref.data(),
                                              db_ref.data(), rows, in, out),
                      DSK_OK);
            EXPECT_TRUE(same_bits(dx, dx_ref) && same_bits(dw, dw_ref) && same_bits(db, db_ref))
                << "backward differs from the fp32-weight kernel on the same values";
            // db is summed in the pass that rounds dy, across the row blocks:
            // the same bits as the bias-gradient kernel's fixed-order sums.
            std::vector<float> db_kernel(out, 0.5f);
            ASSERT_EQ(dsk_cpu_bias_grad(dy.data(), db_kernel.data(), rows, out), DSK_OK);
            EXPECT_TRUE(same_bits(db, db_kernel)) << "db differs from dsk_cpu_bias_grad";
            // Against float64 (a sample of rows, all columns: the triple loops are slow).
            for (int64_t r = 0; r < rows; r += 37) {
                for (int64_t j = 0; j < out; ++j) {
                    double s = bias[j], mag = std::fabs(bias[j]);
                    for (int64_t p = 0; p < in; ++p) {
                        s += bf16(x[r * in + p]) * double(w[j * in + p]);
                        mag += std::fabs(bf16(x[r * in + p]) * double(w[j * in + p]));
                    }
                    ASSERT_NEAR(y[r * out + j], s, 8.0 * (in + 2) * 6e-8 * mag) << "y " << r << "," << j;
                }
                for (int64_t p = 0; p < in; ++p) {
                    double s = 0, mag = 0;
                    for (int64_t j = 0; j < out; ++j) {
                        s += bf16(dy[r * out + j]) * double(w[j * in + p]);
                        mag += std::fabs(bf16(dy[r * out + j]) * double(w[j * in + p]));
                    }
                    ASSERT_NEAR(dx[r * in + p], s, 8.0 * (out + 2) * 6e-8 * (mag + 1e-3)) << "dx " << r << "," << p;
                }
            }
            for (int64_t j = 0; j < out; j += 7)
                for (int64_t p = 0; p < in; ++p) {
                    double s = 0.25, mag = 0.25;
                    for (int64_t r = 0; r < rows; ++r) {
                        s += bf16(dy[r * out + j]) * bf16(x[r * in + p]);
                        mag += std::fabs(bf16(dy[r * out + j]) * bf16(x[r * in + p]));
                    }
                    ASSERT_NEAR(dw[j * in + p], s, 8.0 * (rows + 2) * 6e-8 * mag) << "dw " << j << "," << p;
                }
        }
    }
    float a[4] = {}, d[4] = {};
    uint16_t h[4] = {};
    EXPECT_EQ(dsk_cpu_linear_fwd_bf16w(a, nullptr, nullptr, d, 2, 2, 2), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("w16 is NULL"), std::string::npos) << dsk_last_error();
    EXPECT_EQ(dsk_cpu_linear_bwd_bf16w(a, a, nullptr, d, d, nullptr, 2, 2, 2), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("w is NULL"), std::string::npos) << dsk_last_error();
    EXPECT_EQ(dsk_cpu_linear_bwd_bf16w(a, a, h, d, d, nullptr, 2, -1, 2), DSK_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(dsk_last_error()).find("negative size"), std::string::npos) << dsk_last_error();
    EXPECT_NE(dsk_backend_cpu()->linear_fwd_bf16w, nullptr);
    EXPECT_NE(dsk_backend_cpu()->linear_bwd_bf16w, nullptr);
}

// Linear whose weight value is a bf16 tensor (as a bf16 engine binds it):
// with bf16 products the same results, bit for bit, as the layer with the
// widened fp32 weight; with fp32 products (matmul_dtype F32) the products of
// the unrounded x and dy with the bf16 weight's values (float64 reference).
// Linear and Embedding declare that they read bf16; Embedding gathers the
// widened rows and names a bad id.
TEST(NnGemmBf16, LinearAndEmbeddingReadBf16Weights) {
    const int64_t rows = 6, in = 9, out = 5;
    auto x = random_vec(rows * in, 31), b = random_vec(out, 32), dy = random_vec(rows * out, 33);
    const std::vector<uint16_t> w16 = to_bf16(random_vec(out * in, 34));
    const std::vector<float> w = widened(w16);
    auto host = [](const void* data, ds::Shape s, DType d) {
        Tensor t = Tensor::empty(s, d, ds::Device::cpu(), ds::Allocator::process(), ds::MemCategory::Buffers);
        std::memcpy(t.data_ptr(), data, t.nbytes());
        return t;
    };
    struct Out {
        std::vector<float> y, dx, dw, db;
    };
    auto run = [&](bool bf16_weight, DType matmul) {
        ds::nn::Linear lin(in, out, true);
        EXPECT_TRUE(lin.weight().reads_bf16);
        lin.weight().value = bf16_weight ? host(w16.data(), {out, in}, DType::BF16) : host(w.data(), {out, in}, DType::F32);
        std::memcpy(lin.bias().value.data<float>(), b.data(), b.size() * 4);
        for (ds::nn::Param* p : {&lin.weight(), &lin.bias()})
            p->grad = Tensor::zeros(p->shape, DType::F32, ds::Device::cpu(), ds::Allocator::process(),
                                    ds::MemCategory::Grads);
        ds::nn::RunContext ctx;
        ctx.matmul_dtype = matmul;
        Tensor y = lin.forward(host(x.data(), {rows, in}, DType::F32), ctx);
        Tensor dx = lin.backward(host(dy.data(), {rows, out}, DType::F32), ctx);
        auto vec = [](const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); };
        return Out{vec(y), vec(dx), vec(lin.weight().grad), vec(lin.bias().grad)};
    };
    const Out a = run(true, DType::BF16), ref = run(false, DType::BF16);
    EXPECT_TRUE(same_bits(a.y, ref.y) && same_bits(a.dx, ref.dx) && same_bits(a.dw, ref.dw) && same_bits(a.db, ref.db));
    const Out f = run(true, DType::F32);
    const double tol = 5e-6;  // fp32 accumulation of <= 9 products of magnitude <= 1
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < out; ++j) {
            double s = b[j];
            for (int64_t p = 0; p < in; ++p) s += double(x[r * in + p]) * w[j * in + p];
            ASSERT_NEAR(f.y[r * out + j], s, tol) << "fp32 products: y[" << r << "][" << j << "]";
        }
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t p = 0; p < in; ++p) {
            double s = 0;
            for (int64_t j = 0; j < out; ++j) s += double(dy[r * out + j]) * w[j * in + p];
            ASSERT_NEAR(f.dx[r * in + p], s, tol) << "fp32 products: dx[" << r << "][" << p << "]";
        }
    // A bias in bf16 is refused by name (only the weight is read in place).
    ds::nn::Linear lin(in, out, true);
    lin.set_name("h.0.mlp.c_fc");
    lin.bias().value = host(w16.data(), {out}, DType::BF16);
    ds::nn::RunContext ctx;
    ds::Error err = catch_error([&] { lin.forward(host(x.data(), {rows, in}, DType::F32), ctx); });
    EXPECT_EQ(err.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(err.what()).find("bias must be a contiguous fp32 tensor on cpu, got bf16"), std::string::npos)
        << err.what();

    // Embedding over a bf16 table.
    const int64_t num = 7, dim = 5;
    const std::vector<uint16_t> table16 = to_bf16(random_vec(num * dim, 35));
    ds::nn::Embedding emb(num, dim);
    emb.set_name("wte");
    EXPECT_TRUE(emb.own_params()[0]->reads_bf16);
    emb.own_params()[0]->value = host(table16.data(), {num, dim}, DType::BF16);
    const int32_t ids[4] = {3, 0, 6, 3};
    ds::nn::RunContext ectx;
    ectx.training = false;
    Tensor y = emb.forward(host(ids, {2, 2}, DType::I32), ectx);
    for (int i = 0; i < 4; ++i)
        for (int64_t k = 0; k < dim; ++k)
            ASSERT_EQ(y.data<float>()[i * dim + k], dsk_ref_bf16_to_f32(table16[size_t(ids[i] * dim + k)]))
                << "row " << i << " col " << k;
    const int32_t bad[4] = {1, 2, 7, 0};
    err = catch_error([&] { emb.forward(host(bad, {2, 2}, DType::I32), ectx); });
    EXPECT_EQ(err.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(err.what()).find("token id 7 at position [1, 0]"), std::string::npos) << err.what();
}
