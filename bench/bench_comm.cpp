// Communicator throughput against raw MPI, measured in the same run:
//   mpirun -np 2 bench_comm [count=100000000] [iterations=5]
// times our allreduce (fp32 sum, out of place) against MPI_Allreduce, and our
// reduce_scatter (each rank gets count/size) against MPI_Reduce_scatter_block,
// on the same buffers. Each timing is the slowest rank's, between barriers;
// the median over the iterations is reported, with the algorithm bandwidth
// (bytes reduced / time) and the ratio ours / raw (1.00 = no overhead).
// Also: the non-blocking MPI calls our MPI backend is built on (the overhead
// of our layer is ours / those), in-place allreduce, bf16 allreduce
// (reduced in fp32, see comm_mpi.cpp), and all-to-all with equal splits (the
// exchange an MoE layer's tokens take, ds_comm_all_to_all_single) against
// MPI_Alltoall of the same bytes.
#include "comm/mpi_include.h"  // <mpi.h>, C API only

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "comm/communicator.h"

namespace {

// The slowest rank's time for f(), in seconds, between barriers.
double time_once(const std::function<void()>& f) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    f();
    double dt = MPI_Wtime() - t0, worst = 0;
    MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

// Medians over `iters` rounds; each round runs every f once, in turn, so a
// slow spell of the machine hits all of them alike.
std::vector<double> time_medians(int iters, const std::vector<std::function<void()>>& fs) {
    std::vector<std::vector<double>> t(fs.size());
    for (int i = 0; i < iters; ++i)
        for (size_t k = 0; k < fs.size(); ++k) t[k].push_back(time_once(fs[k]));
    std::vector<double> med;
    for (auto& v : t) {
        std::sort(v.begin(), v.end());
        med.push_back(v[v.size() / 2]);
    }
    return med;
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
        const auto raw_iar = [&] {
            MPI_Request r;
            MPI_Iallreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        };
        const auto raw_iar_inplace = [&] {
            MPI_Request r;
            MPI_Iallreduce(MPI_IN_PLACE, recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        };
        const auto raw_irs = [&] {
            MPI_Request r;
            MPI_Ireduce_scatter_block(send.data(), recv.data(), static_cast<int>(block), MPI_FLOAT, MPI_SUM,
                                      MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        };
        const auto raw_a2a = [&] {
            MPI_Alltoall(send.data(), static_cast<int>(block), MPI_FLOAT, recv.data(), static_cast<int>(block),
                         MPI_FLOAT, MPI_COMM_WORLD);
        };
        const auto raw_ia2a = [&] {
            MPI_Request r;
            MPI_Ialltoall(send.data(), static_cast<int>(block), MPI_FLOAT, recv.data(), static_cast<int>(block),
                          MPI_FLOAT, MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        };
        const auto our_a2a = [&] { comm->alltoall(send.data(), recv.data(), block, ds::DType::F32); };
        const std::vector<std::function<void()>> fs = {raw_ar,   raw_iar, our_ar, raw_iar_inplace, our_ar_inplace,
                                                       our_ar16, raw_rs,  raw_irs, our_rs, raw_a2a, raw_ia2a, our_a2a};
        for (const auto& f : fs) f();  // warm up: page faults, MPI's first-touch set-up
        const std::vector<double> t = time_medians(iters, fs);
        if (rank == 0) {
            const double gb = static_cast<double>(count) * 4 / 1e9, gb_rs = static_cast<double>(rs_count) * 4 / 1e9;
            const double gb16 = static_cast<double>(count) * 2 / 1e9;
            const char* names[] = {"MPI_Allreduce fp32 (raw)", "MPI_Iallreduce+MPI_Wait fp32 (raw)",
                                   "ds allreduce fp32", "MPI_Iallreduce in place+Wait (raw)", "ds allreduce fp32 in place",
                                   "ds allreduce bf16 (fp32 on the wire)", "MPI_Reduce_scatter_block fp32 (raw)",
                                   "MPI_Ireduce_scatter_block+Wait (raw)", "ds reduce_scatter fp32",
                                   "MPI_Alltoall fp32 (raw)", "MPI_Ialltoall+MPI_Wait fp32 (raw)",
                                   "ds all_to_all_single fp32"};
            const double bytes[] = {gb, gb, gb, gb, gb, gb16, gb_rs, gb_rs, gb_rs, gb_rs, gb_rs, gb_rs};
            const double base[] = {t[0], t[0], t[0], t[0], t[0], t[0], t[6], t[6], t[6], t[9], t[9], t[9]};
            std::printf("bench_comm: %d ranks, %zu elements, median of %d\n", size, count, iters);
            std::printf("  %-38s %9s %9s %9s\n", "operation", "ms", "GB/s", "vs raw");
            for (size_t k = 0; k < fs.size(); ++k)
                std::printf("  %-38s %9.1f %9.2f %9.2f\n", names[k], t[k] * 1e3, bytes[k] / t[k], t[k] / base[k]);
            std::printf("  (GB/s = bytes of the input / time; vs raw = time / the blocking MPI call's time)\n");
        }
        comm->finalize();
    } catch (const ds::Error& e) {
        std::fprintf(stderr, "bench_comm: rank %d: %s\n", rank, e.what());
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}
