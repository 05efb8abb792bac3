// ds_comm_all_reduce, _all_gather_into_tensor, _reduce_scatter_tensor,
// _all_to_all_single, _broadcast and _barrier under mpirun (2, 3 and 4
// ranks), against a float64 formula of every rank's values: rank r's element
// i is v(r, i) = ((r + 1) * (i % 7) - 3), small integers, so sums are exact in
// every dtype and the expected value of each element is computed
// independently here. avg is checked against the double mean rounded once
// (fp32: 1 ulp; bf16: 1 bf16 ulp). Also every error (wrong counts, dtypes,
// op, src, a non-contiguous tensor) named, with the communicator still usable
// afterwards, and the same calls over a ProcessTopology axis.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "comm_test_util.h"
#include "deepspeed_c.h"
#include "mpi_gtest_main.h"

using ds_comm_test::host_view;

namespace {

constexpr DLDataType kF32 = {kDLFloat, 32, 1}, kBF16 = {kDLBfloat, 16, 1}, kI64 = {kDLInt, 64, 1},
                     kI32 = {kDLInt, 32, 1};

double v(int r, int64_t i) { return static_cast<double>((r + 1) * (i % 7) - 3); }

// A host buffer of n elements of dtype dt holding v(r, i + offset).
struct Buf {
    DLDataType dt;
    std::vector<uint8_t> bytes;
    std::vector<int64_t> shape;
    Buf(DLDataType d, int64_t n) : dt(d), bytes(static_cast<size_t>(n) * d.bits / 8), shape{n} {}
    int64_t n() const { return shape[0]; }
    void fill(int r, int64_t offset = 0) {
        for (int64_t i = 0; i < n(); ++i) set(i, v(r, i + offset));
    }
    void set(int64_t i, double x) {
        if (dt.code == kDLFloat) reinterpret_cast<float*>(bytes.data())[i] = static_cast<float>(x);
        else if (dt.code == kDLBfloat) reinterpret_cast<uint16_t*>(bytes.data())[i] = ds_comm_test::oracle_bf16(static_cast<float>(x));
        else if (dt.bits == 64) reinterpret_cast<int64_t*>(bytes.data())[i] = static_cast<int64_t>(x);
        else reinterpret_cast<int32_t*>(bytes.data())[i] = static_cast<int32_t>(x);
    }
    double get(int64_t i) const {
        if (dt.code == kDLFloat) return reinterpret_cast<const float*>(bytes.data())[i];
        if (dt.code == kDLBfloat) return ds_comm_test::bf16_to_float(reinterpret_cast<const uint16_t*>(bytes.data())[i]);
        if (dt.bits == 64) return static_cast<double>(reinterpret_cast<const int64_t*>(bytes.data())[i]);
        return reinterpret_cast<const int32_t*>(bytes.data())[i];
    }
    DLTensor t() { return host_view(bytes.data(), dt, shape.data(), 1); }
};

ds_comm_t* world() {
    ds_comm_options_t o;
    ds_comm_options_init(&o, sizeof o);
    o.timeout_ms = 60000;
    ds_comm_t* w = nullptr;
    EXPECT_EQ(ds_comm_create_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &w), DS_OK) << ds_last_error();
    return w;
}

int32_t rank_of(const ds_comm_t* c) {
    int32_t r = 0;
    ds_comm_rank(c, &r);
    return r;
}
int32_t size_of(const ds_comm_t* c) {
    int32_t s = 0;
    ds_comm_size(c, &s);
    return s;
}

// The collectives of `c` (world or an axis) against the formula; `ranks`
// maps c's rank to the value seed r used in v(r, i).
void check_collectives(ds_comm_t* c, const std::vector<int>& seeds) {
    const int me = rank_of(c), P = size_of(c);
    const int64_t n = 1001 * P;  // a multiple of P, odd per rank
    for (DLDataType dt : {kF32, kBF16, kI64, kI32}) {
        const std::string what = std::to_string(dt.code) + "/" + std::to_string(dt.bits);
        // all_reduce: sum, max; avg for the floating types
        for (int32_t op : {DS_REDUCE_SUM, DS_REDUCE_MAX, DS_REDUCE_AVG}) {
            if (op == DS_REDUCE_AVG && dt.code != kDLFloat && dt.code != kDLBfloat) continue;
            Buf b(dt, n);
            b.fill(seeds[me]);
            DLTensor t = b.t();
            ASSERT_EQ(ds_comm_all_reduce(c, &t, op), DS_OK) << ds_last_error();
            for (int64_t i = 0; i < n; ++i) {
                double want = op == DS_REDUCE_MAX ? -1e300 : 0.0;
                for (int q = 0; q < P; ++q)
                    want = op == DS_REDUCE_MAX ? std::max(want, v(seeds[q], i)) : want + v(seeds[q], i);
                if (op == DS_REDUCE_AVG) {
                    want /= P;
                    const double tol = dt.code == kDLBfloat ? std::fabs(want) / 128 + 1e-30 : std::fabs(want) * 2e-7;
                    ASSERT_NEAR(b.get(i), want, tol) << what << " avg element " << i;
                } else {
                    ASSERT_EQ(b.get(i), want) << what << " op " << op << " element " << i;
                }
            }
        }
        // all_gather_into_tensor: output [P * m] holds each rank's input in rank order
        {
            const int64_t m = 513;
            Buf in(dt, m), out(dt, m * P);
            in.fill(seeds[me]);
            DLTensor ti = in.t(), to = out.t();
            ASSERT_EQ(ds_comm_all_gather_into_tensor(c, &to, &ti), DS_OK) << ds_last_error();
            for (int q = 0; q < P; ++q)
                for (int64_t i = 0; i < m; ++i) ASSERT_EQ(out.get(q * m + i), v(seeds[q], i)) << what;
        }
        // reduce_scatter_tensor: block me of the sum
        {
            const int64_t m = 257;
            Buf in(dt, m * P), out(dt, m);
            in.fill(seeds[me]);
            DLTensor ti = in.t(), to = out.t();
            ASSERT_EQ(ds_comm_reduce_scatter_tensor(c, &to, &ti, DS_REDUCE_SUM), DS_OK) << ds_last_error();
            for (int64_t i = 0; i < m; ++i) {
                double want = 0;
                for (int q = 0; q < P; ++q) want += v(seeds[q], me * m + i);
                ASSERT_EQ(out.get(i), want) << what << " element " << i;
            }
        }
        // all_to_all_single: block j of rank q's input lands as block q of rank j's output
        {
            const int64_t m = 129;
            Buf in(dt, m * P), out(dt, m * P);
            for (int j = 0; j < P; ++j)
                for (int64_t i = 0; i < m; ++i) in.set(j * m + i, v(seeds[me], 10 * j + i));
            DLTensor ti = in.t(), to = out.t();
            ASSERT_EQ(ds_comm_all_to_all_single(c, &to, &ti), DS_OK) << ds_last_error();
            for (int q = 0; q < P; ++q)
                for (int64_t i = 0; i < m; ++i) ASSERT_EQ(out.get(q * m + i), v(seeds[q], 10 * me + i)) << what;
        }
        // broadcast from the last rank
        {
            Buf b(dt, 77);
            b.fill(seeds[me]);
            DLTensor t = b.t();
            ASSERT_EQ(ds_comm_broadcast(c, &t, P - 1), DS_OK) << ds_last_error();
            for (int64_t i = 0; i < 77; ++i) ASSERT_EQ(b.get(i), v(seeds[P - 1], i)) << what;
        }
    }
    ASSERT_EQ(ds_comm_barrier(c), DS_OK) << ds_last_error();
}

}  // namespace

TEST(CommTensorCollectives, EveryOpAndDtypeMatchesTheFormula) {
    ds_comm_t* w = world();
    std::vector<int> seeds(static_cast<size_t>(size_of(w)));
    for (size_t r = 0; r < seeds.size(); ++r) seeds[r] = static_cast<int>(r);
    check_collectives(w, seeds);
    EXPECT_EQ(ds_comm_finalize(w), DS_OK) << ds_last_error();
    ds_comm_destroy(w);
}

// The same over the data axis of a pipe x data topology (DeepSpeed's
// ReduceTiedGrads / data-parallel reductions run on such axis groups).
TEST(CommTensorCollectives, OverATopologyAxis) {
    ds_comm_t* w = world();
    const int W = size_of(w);
    if (W % 2 != 0) {
        ds_comm_finalize(w);
        ds_comm_destroy(w);
        GTEST_SKIP() << "needs an even world for a 2 x (W/2) topology";
    }
    ds_topology_t* topo = nullptr;
    ASSERT_EQ(ds_topology_create_pipe_data(2, W / 2, &topo), DS_OK) << ds_last_error();
    ds_comm_t* data = nullptr;
    ASSERT_EQ(ds_topology_comm(topo, w, "data", &data), DS_OK) << ds_last_error();
    // the data group's members are world ranks base + k: seed each by its world rank
    std::vector<int32_t> lists(static_cast<size_t>(W));
    int32_t n_lists = 0, list_len = 0;
    ASSERT_EQ(ds_topology_axis_comm_lists(topo, "data", lists.data(), static_cast<int32_t>(lists.size()), &n_lists,
                                          &list_len),
              DS_OK)
        << ds_last_error();
    const int me = rank_of(w);
    std::vector<int> seeds;
    for (int32_t l = 0; l < n_lists; ++l) {
        const int32_t* ranks = lists.data() + l * list_len;
        bool mine = false;
        for (int32_t k = 0; k < list_len; ++k) mine = mine || ranks[k] == me;
        if (mine)
            for (int32_t k = 0; k < list_len; ++k) seeds.push_back(ranks[k]);
    }
    ASSERT_EQ(static_cast<int>(seeds.size()), size_of(data));
    check_collectives(data, seeds);
    EXPECT_EQ(ds_comm_finalize(data), DS_OK) << ds_last_error();
    ds_comm_destroy(data);
    ds_topology_destroy(topo);
    EXPECT_EQ(ds_comm_finalize(w), DS_OK) << ds_last_error();
    ds_comm_destroy(w);
}

TEST(CommTensorCollectives, BadArgumentsAreNamedAndTheCommunicatorStaysUsable) {
    ds_comm_t* w = world();
    const int P = size_of(w);
    Buf a(kF32, 6 * P), small(kF32, 5), i64(kI64, 6 * P);
    DLTensor ta = a.t(), ts = small.t(), ti = i64.t();
    auto expect = [](ds_status_t got, ds_status_t want, const char* sub) {
        EXPECT_EQ(got, want) << ds_last_error();
        EXPECT_NE(std::string(ds_last_error()).find(sub), std::string::npos) << ds_last_error();
    };
    // Local checks (no rank communicates): every rank fails the same way.
    expect(ds_comm_all_reduce(w, &ta, 7), DS_ERR_INVALID_ARGUMENT, "op = 7");
    expect(ds_comm_all_reduce(w, nullptr, DS_REDUCE_SUM), DS_ERR_INVALID_ARGUMENT, "tensor");
    expect(ds_comm_all_reduce(w, &ti, DS_REDUCE_AVG), DS_ERR_INVALID_ARGUMENT, "avg");
    expect(ds_comm_all_gather_into_tensor(w, &ts, &ta), DS_ERR_INVALID_ARGUMENT, "output has 5 elements");
    expect(ds_comm_all_gather_into_tensor(w, &ti, &ta), DS_ERR_INVALID_ARGUMENT, "output is int64 but input is fp32");
    expect(ds_comm_reduce_scatter_tensor(w, &ta, &ts, DS_REDUCE_SUM), DS_ERR_INVALID_ARGUMENT, "input has 5");
    expect(ds_comm_all_to_all_single(w, &ts, &ta), DS_ERR_INVALID_ARGUMENT, "output has 5 elements");
    if (P > 1) expect(ds_comm_all_to_all_single(w, &ts, &ts), DS_ERR_INVALID_ARGUMENT, "split evenly");
    expect(ds_comm_broadcast(w, &ta, P), DS_ERR_INVALID_ARGUMENT, "src");
    int64_t strides[1] = {2}, half[1] = {3 * P};
    DLTensor strided = host_view(a.bytes.data(), kF32, half, 1);
    strided.strides = strides;
    expect(ds_comm_all_reduce(w, &strided, DS_REDUCE_SUM), DS_ERR_INVALID_ARGUMENT, "contiguous");
    expect(ds_comm_barrier(nullptr), DS_ERR_INVALID_HANDLE, "comm");
    // still usable
    a.fill(rank_of(w));
    EXPECT_EQ(ds_comm_all_reduce(w, &ta, DS_REDUCE_SUM), DS_OK) << ds_last_error();
    double want = 0;
    for (int q = 0; q < P; ++q) want += v(q, 5);
    EXPECT_EQ(a.get(5), want);
    EXPECT_EQ(ds_comm_finalize(w), DS_OK) << ds_last_error();
    ds_comm_destroy(w);
}
