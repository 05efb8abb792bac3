// Communicator throughput against raw MPI, measured in the same run:
//   mpirun -np 2 bench_comm [count=100000000] [iterations=5]
// times our allreduce (fp32 sum, out of place) against MPI_Allreduce, and our
// reduce_scatter (each rank gets count/size) against MPI_Reduce_scatter_block,
// on the same buffers. Each timing is the slowest rank's, between barriers;
// the median over the iterations is reported, with the algorithm bandwidth
// (bytes reduced / time) and the ratio ours / raw (1.00 = no overhead).
// Ours also runs bf16 allreduce (reduced in fp32, see comm_mpi.cpp).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "comm/communicator.h"

namespace {

// Median over `iters` of the slowest rank's time for f(), in seconds.
double time_median(int iters, const std::function<void()>& f) {
    std::vector<double> t;
    for (int i = 0; i < iters; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        f();
        double dt = MPI_Wtime() - t0, worst = 0;
        MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t.push_back(worst);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const size_t count = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000000ull;
    const int iters = argc > 2 ? std::atoi(argv[2]) : 5;
    const size_t block = count / static_cast<size_t>(size);
    const size_t rs_count = block * static_cast<size_t>(size);
    int rc = 0;
    try {
        ds::comm::Options o;
        o.timeout_ms = 600000;
        auto comm = ds::comm::make_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), o);
        std::vector<float> send(count), recv(count);
        for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((i + static_cast<size_t>(rank)) % 1000);
        std::vector<uint16_t> send16(count), recv16(count);
        for (size_t i = 0; i < count; ++i) send16[i] = 0x3F80;  // bf16 1.0

        const auto raw_ar = [&] {
            MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        };
        const auto our_ar = [&] { comm->allreduce(send.data(), recv.data(), count, ds::DType::F32, ds::comm::Op::Sum); };
        const auto raw_rs = [&] {
            MPI_Reduce_scatter_block(send.data(), recv.data(), static_cast<int>(block), MPI_FLOAT, MPI_SUM,
                                     MPI_COMM_WORLD);
        };
        const auto our_rs = [&] {
            comm->reduce_scatter(send.data(), recv.data(), block, ds::DType::F32, ds::comm::Op::Sum);
        };
        const auto our_ar_inplace = [&] {
            comm->allreduce(recv.data(), recv.data(), count, ds::DType::F32, ds::comm::Op::Sum);
        };
        const auto our_ar16 = [&] {
            comm->allreduce(send16.data(), recv16.data(), count, ds::DType::BF16, ds::comm::Op::Sum);
        };
        // Warm up every path (page faults, MPI's first-touch registration).
        raw_ar();
        our_ar();
        raw_rs();
        our_rs();
        our_ar16();
        our_ar_inplace();

        const double t_raw_ar = time_median(iters, raw_ar), t_our_ar = time_median(iters, our_ar);
        const double t_raw_rs = time_median(iters, raw_rs), t_our_rs = time_median(iters, our_rs);
        const double t_our_ar16 = time_median(iters, our_ar16);
        const double t_our_ar_inplace = time_median(iters, our_ar_inplace);
        if (rank == 0) {
            const double gb = static_cast<double>(count) * 4 / 1e9, gb_rs = static_cast<double>(rs_count) * 4 / 1e9;
            const double gb16 = static_cast<double>(count) * 2 / 1e9;
            std::printf("bench_comm: %d ranks, %zu elements, median of %d\n", size, count, iters);
            std::printf("  %-38s %9s %9s %7s\n", "operation", "ms", "GB/s", "ratio");
            std::printf("  %-38s %9.1f %9.2f %7s\n", "MPI_Allreduce fp32 (raw)", t_raw_ar * 1e3, gb / t_raw_ar, "1.00");
            std::printf("  %-38s %9.1f %9.2f %7.2f\n", "ds allreduce fp32", t_our_ar * 1e3, gb / t_our_ar,
                        t_our_ar / t_raw_ar);
            std::printf("  %-38s %9.1f %9.2f %7s\n", "MPI_Reduce_scatter_block fp32 (raw)", t_raw_rs * 1e3,
                        gb_rs / t_raw_rs, "1.00");
            std::printf("  %-38s %9.1f %9.2f %7.2f\n", "ds reduce_scatter fp32", t_our_rs * 1e3, gb_rs / t_our_rs,
                        t_our_rs / t_raw_rs);
            std::printf("  %-38s %9.1f %9.2f %7.2f\n", "ds allreduce fp32 in place", t_our_ar_inplace * 1e3,
                        gb / t_our_ar_inplace, t_our_ar_inplace / t_raw_ar);
            std::printf("  %-38s %9.1f %9.2f %7.2f\n", "ds allreduce bf16 (fp32 on the wire)", t_our_ar16 * 1e3,
                        gb16 / t_our_ar16, t_our_ar16 / t_raw_ar);
            std::printf("  (GB/s = bytes of the input / time; ratio = time / raw MPI fp32 of the same count)\n");
        }
        comm->finalize();
    } catch (const ds::Error& e) {
        std::fprintf(stderr, "bench_comm: rank %d: %s\n", rank, e.what());
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}
