// ZeRO engine throughput against raw MPI and the bare optimizer kernel,
// measured in the same run:
//   OMP_NUM_THREADS=1 mpirun -np 2 bench_zero [params=100000000] [reps=5]
// The model: `params` fp32 parameters in 10 tensors; AdamW, gradient
// clipping 1.0 (active: the gradient norm is far above it), one micro-step
// per step. For each engine configuration a rep times
//   grad path = accumulate_grad for every tensor + backward(nullptr): at
//               ZeRO-2 the whole reduction (copy into buckets, all-reduce,
//               the owned fragments added into this rank's partition);
//               at ZeRO 0/1 only the local accumulation (they reduce in step);
//   step      = the boundary step: at ZeRO-2 norm, AdamW on this rank's
//               partition and the all-gather of the updated weights; at
//               ZeRO 0/1 also the gradient all-reduce.
// The references, timed in the same reps: MPI_Allreduce (out of place) of the
// whole gradient, MPI_Iallreduce + MPI_Wait and the library's communicator
// allreduce on the same bytes (the engine's communicator is built on the
// non-blocking call), MPI_Reduce_scatter_block of the same bytes,
// MPI_Allgather (in place) of the weights, and dsk_cpu_adam_step (AdamW, fp32,
// clipping factor folded into grad_scale) on one partition (params / N).
// Each time is the slowest rank's, between barriers; medians are printed.
#include "comm/mpi_include.h"  // <mpi.h>, C API only

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/factory.h"
#include "core/error.h"
#include "engine/engine.h"
#include "kernels.h"

namespace {

constexpr int kTensors = 10;

// The slowest rank's time for f(), in seconds, between barriers.
double time_once(const std::function<void()>& f) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    f();
    double dt = MPI_Wtime() - t0, worst = 0;
    MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Setup {
    const char* label;
    int stage;
    int64_t bucket;  // reduce_bucket_size; <= 0: the default
    bool overlap;
};

std::string config(const Setup& s) {
    std::string zero = "\"stage\": " + std::to_string(s.stage);
    if (s.bucket > 0) zero += ", \"reduce_bucket_size\": " + std::to_string(s.bucket);
    zero += std::string(", \"overlap_comm\": ") + (s.overlap ? "true" : "false");
    return "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 1, "
           "\"gradient_clipping\": 1.0, \"zero_optimization\": {" + zero + "}, "
           "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}}";
}

DLTensor f32_1d(float* data, int64_t* shape) {
    DLTensor t{};
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    return t;
}

struct Timings {
    double grad = 0, step = 0;
};

// Builds the engine, warms it up with one step, then times `reps` steps;
// `between` runs after each (the raw references, interleaved so a slow spell
// of the machine hits both alike).
Timings run_engine(const Setup& s, const std::shared_ptr<ds::comm::Communicator>& comm, int64_t params, int reps,
                   const std::function<void()>& between) {
    ds::EngineOptions o;
    o.log_level = DS_LOG_WARN;
    ds::Engine e(config(s), o, comm);
    std::vector<int64_t> sizes(kTensors, params / kTensors);
    sizes.back() += params % kTensors;
    std::vector<float> host(static_cast<size_t>(sizes.back()));
    for (size_t j = 0; j < host.size(); ++j) host[j] = 0.02f * std::sin(static_cast<float>(j));
    for (int i = 0; i < kTensors; ++i) {
        int64_t shape = sizes[static_cast<size_t>(i)];
        DLTensor t = f32_1d(host.data(), &shape);
        e.add_param(("layer" + std::to_string(i) + ".weight").c_str(), &t, DS_PARAM_TRAINABLE);
    }
    e.init();
    // The "gradient": the host's buffer, the same for every tensor (a norm of
    // ~0.01 per element, far above the clip of 1.0 over 1e8 elements).
    for (size_t j = 0; j < host.size(); ++j) host[j] = 0.01f * static_cast<float>(static_cast<int>(j % 7) - 3);
    const auto grad_path = [&] {
        for (int i = 0; i < kTensors; ++i) {
            int64_t shape = sizes[static_cast<size_t>(i)];
            DLTensor t = f32_1d(host.data(), &shape);
            e.accumulate_grad(("layer" + std::to_string(i) + ".weight").c_str(), &t);
        }
        e.backward(nullptr);
    };
    const auto step = [&] { e.step(); };
    grad_path();  // warm up: first touch of every buffer
    step();
    std::vector<double> g, st;
    for (int r = 0; r < reps; ++r) {
        g.push_back(time_once(grad_path));
        st.push_back(time_once(step));
        if (between) between();
    }
    return {median(g), median(st)};
}

}  // namespace

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int64_t params = argc > 1 ? std::strtoll(argv[1], nullptr, 10) : 100000000;
    const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
    int rc = 0;
    try {
        DS_CHECK(params >= kTensors * 2 * size && params <= (int64_t{1} << 31) - 1, DS_ERR_INVALID_ARGUMENT,
                 "params = %lld: must be in [%d, 2^31)", static_cast<long long>(params), kTensors * 2 * size);
        ds::comm::Options co;
        co.timeout_ms = 600000;
        auto comm = ds::comm::make_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), co);
        const int count = static_cast<int>(params);
        const int64_t part = (params + size - 1) / size;

        // References: buffers sized for the whole gradient and one partition.
        std::vector<float> whole(static_cast<size_t>(params)), block(static_cast<size_t>(params / size));
        for (size_t j = 0; j < whole.size(); ++j) whole[j] = 1e-3f * static_cast<float>(j % 5);
        std::vector<float> p(static_cast<size_t>(part), 0.1f), gr(static_cast<size_t>(part), 0.01f),
            m(static_cast<size_t>(part), 0.0f), v(static_cast<size_t>(part), 0.0f);
        int adam_t = 0;
        // Out of place: on Open MPI 4.1 MPI_IN_PLACE is several times slower
        // for large buffers, and the engine's communicator never uses it.
        std::vector<float> reduced(static_cast<size_t>(params));
        const auto raw_allreduce = [&] {
            MPI_Allreduce(whole.data(), reduced.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        };
        // What the engine's communicator is built on (comm_mpi.cpp), and the
        // communicator itself: the grad path's floor on this MPI.
        const auto raw_iallreduce = [&] {
            MPI_Request r;
            MPI_Iallreduce(MPI_IN_PLACE, whole.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        };
        const auto ds_allreduce = [&] {
            comm->allreduce(whole.data(), whole.data(), static_cast<size_t>(count), ds::DType::F32,
                            ds::comm::Op::Sum);
        };
        const auto raw_reduce_scatter = [&] {
            MPI_Reduce_scatter_block(whole.data(), block.data(), count / size, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        };
        const auto raw_allgather = [&] {
            MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, whole.data(), count / size, MPI_FLOAT,
                          MPI_COMM_WORLD);
        };
        const auto bare_adam = [&] {
            ++adam_t;
            dsk_adam_hparams h{};
            h.lr = 1e-3f;
            h.beta1 = 0.9f;
            h.beta2 = 0.999f;
            h.eps = 1e-8f;
            h.weight_decay = 0.01f;
            h.bias_correction1 = static_cast<float>(1.0 - std::pow(0.9, adam_t));
            h.bias_correction2_rsqrt = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(0.999, adam_t)));
            h.grad_scale = 0.5f;  // the fused unscale x clip factor
            h.adamw_mode = 1;
            dsk_cpu_adam_step(p.data(), gr.data(), DSK_F32, m.data(), v.data(), DSK_F32, nullptr, DSK_F16,
                          static_cast<size_t>(part), &h);
        };
        raw_allreduce();  // warm up
        raw_iallreduce();
        ds_allreduce();
        raw_reduce_scatter();
        raw_allgather();
        bare_adam();
        std::vector<double> t_ar, t_iar, t_dsar, t_rs, t_ag, t_adam;
        const auto references = [&] {
            t_ar.push_back(time_once(raw_allreduce));
            t_iar.push_back(time_once(raw_iallreduce));
            t_dsar.push_back(time_once(ds_allreduce));
            t_rs.push_back(time_once(raw_reduce_scatter));
            t_ag.push_back(time_once(raw_allgather));
            t_adam.push_back(time_once(bare_adam));
        };

        const Setup setups[] = {
            {"zero2 (reduce_bucket_size 5e8, overlap_comm off)", 2, 500000000, false},
            {"zero2 (reduce_bucket_size 5e7, overlap_comm on)", 2, 50000000, true},
            {"zero1", 1, -1, false},
            {"zero0", 0, -1, false},
        };
        std::vector<Timings> res;
        for (const Setup& s : setups) res.push_back(run_engine(s, comm, params, reps, references));

        const double ar = median(t_ar), iar = median(t_iar), dsar = median(t_dsar), rs = median(t_rs), ag = median(t_ag), adam = median(t_adam);
        if (rank == 0) {
            const double mp = static_cast<double>(params) / 1e6, pp = static_cast<double>(part) / 1e6;
            std::printf("bench_zero: %d ranks, %.0fM fp32 parameters in %d tensors, AdamW, clipping 1.0, gas 1; "
                        "median of %d reps (slowest rank), OMP_NUM_THREADS=%s\n",
                        size, mp, kTensors, reps, std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "unset");
            std::printf("references: MPI_Allreduce %.0fM fp32: %.0f ms; MPI_Reduce_scatter_block %.0fM fp32: %.0f ms; "
                        "MPI_Allgather %.0fM fp32: %.0f ms; dsk_adam_step %.0fM: %.0f ms\n",
                        mp, ar * 1e3, mp, rs * 1e3, mp, ag * 1e3, pp, adam * 1e3);
            std::printf("references: MPI_Iallreduce+MPI_Wait %.0fM fp32 in place: %.0f ms; ds communicator allreduce "
                        "%.0fM fp32 in place: %.0f ms\n",
                        mp, iar * 1e3, mp, dsar * 1e3);
            for (size_t k = 0; k < 2; ++k) {
                std::printf("%s grad reduction: %.0f ms; MPI_Allreduce %.0fM fp32: %.0f ms; ratio %.2f "
                            "(vs MPI_Reduce_scatter_block %.2f, MPI_Iallreduce %.2f, ds allreduce %.2f)\n",
                            setups[k].label, res[k].grad * 1e3, mp, ar * 1e3, res[k].grad / ar, res[k].grad / rs,
                            res[k].grad / iar, res[k].grad / dsar);
                std::printf("%s step: %.0f ms; dsk_adam_step %.0fM: %.0f ms; ratio %.2f "
                            "(vs adam + MPI_Allgather %.0f ms: %.2f)\n",
                            setups[k].label, res[k].step * 1e3, pp, adam * 1e3, res[k].step / adam,
                            (adam + ag) * 1e3, res[k].step / (adam + ag));
            }
            for (size_t k = 2; k < 4; ++k)
                std::printf("%s: grad accumulation %.0f ms; step (all-reduce, norm, AdamW%s) %.0f ms; "
                            "whole %.0f ms\n",
                            setups[k].label, res[k].grad * 1e3, setups[k].stage == 1 ? " on the partition, all-gather" : "",
                            res[k].step * 1e3, (res[k].grad + res[k].step) * 1e3);
            std::printf("zero2 whole (grad reduction + step): %.0f ms (bucket 5e8), %.0f ms (bucket 5e7, overlap)\n",
                        (res[0].grad + res[0].step) * 1e3, (res[1].grad + res[1].step) * 1e3);
        }
        comm->finalize();
    } catch (const ds::Error& e) {
        std::fprintf(stderr, "bench_zero: rank %d: %s\n", rank, e.what());
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}
