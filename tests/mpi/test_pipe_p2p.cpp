// ds_pipe_send / ds_pipe_recv under mpirun (2, 3 ranks; see CMakeLists for
// 4), and a host-run pipeline: every rank runs its stage of a small tanh MLP
// by executing the ds_pipe_schedule_* (TrainSchedule, 1F1B) instructions
// itself, with activations and gradients moved by ds_pipe_send/recv over the
// pipe-axis communicator of a ProcessTopology and gradients averaged over
// the data axis at ReduceGrads; after 3 SGD steps every stage's weights and
// the loss equal a float64 single-process computation of the same model on
// the same global batch (tolerance: float32 stage arithmetic, 2e-5
// relative + 1e-6). Every pipe x data layout of the world is run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/comm_handles.h"
#include "comm_test_util.h"
#include "deepspeed_c.h"
#include "mpi_gtest_main.h"

using namespace ds_comm_test;

namespace {

constexpr DLDataType kF32 = {kDLFloat, 32, 1};

ds_comm_t* world_handle(int32_t timeout_ms = DS_UNSET_I32) {
    ds_comm_options_t o;
    ds_comm_options_init(&o, sizeof o);
    o.timeout_ms = timeout_ms;
    ds_comm_t* w = nullptr;
    EXPECT_EQ(ds_comm_create_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &w), DS_OK) << ds_last_error();
    return w;
}

}  // namespace

TEST(PipeP2P, TensorsOfEveryDtypeAndShapeRoundTrip) {
    ds_comm_t* w = world_handle();
    int32_t rank = 0;
    ds_comm_rank(w, &rank);
    if (rank < 2) {
        const int peer = 1 - rank;
        const DLDataType types[] = {{kDLFloat, 32, 1}, {kDLBfloat, 16, 1}, {kDLInt, 64, 1}, {kDLUInt, 8, 1}};
        const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {7}, {3, 5}, {2, 1, 4, 3}, {1000003}};
        int tag = 0;
        for (const DLDataType& dt : types) {
            for (std::vector<int64_t> shape : shapes) {
                int64_t n = 1;
                for (int64_t d : shape) n *= d;
                const size_t bytes = static_cast<size_t>(n) * dt.bits / 8;
                std::vector<uint8_t> mine(bytes), got(bytes, 0xEE);
                for (size_t i = 0; i < bytes; ++i) mine[i] = static_cast<uint8_t>(i * 31 + rank * 7 + tag);
                DLTensor s = host_view(mine.data(), dt, shape.data(), static_cast<int32_t>(shape.size()));
                DLTensor r = host_view(got.data(), dt, shape.data(), static_cast<int32_t>(shape.size()));
                // rank 0 sends first; both directions
                if (rank == 0) {
                    ASSERT_EQ(ds_pipe_send(w, &s, peer, tag), DS_OK) << ds_last_error();
                    ASSERT_EQ(ds_pipe_recv(w, &r, peer, tag), DS_OK) << ds_last_error();
                } else {
                    ASSERT_EQ(ds_pipe_recv(w, &r, peer, tag), DS_OK) << ds_last_error();
                    ASSERT_EQ(ds_pipe_send(w, &s, peer, tag), DS_OK) << ds_last_error();
                }
                for (size_t i = 0; i < bytes; ++i)
                    ASSERT_EQ(got[i], static_cast<uint8_t>(i * 31 + peer * 7 + tag)) << "byte " << i;
                ++tag;
            }
        }
    }
    EXPECT_EQ(ds_comm_finalize(w), DS_OK) << ds_last_error();
    ds_comm_destroy(w);
}

TEST(PipeP2P, AMismatchIsNamedAndTheStreamStaysAligned) {
    ds_comm_t* w = world_handle();
    int32_t rank = 0;
    ds_comm_rank(w, &rank);
    if (rank < 2) {
        float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0};
        int64_t s4[1] = {4}, s5[1] = {5}, s23[2] = {2, 3};
        if (rank == 0) {
            DLTensor t = host_view(a, kF32, s4, 1);
            EXPECT_EQ(ds_pipe_send(w, &t, 1, 3), DS_OK) << ds_last_error();
            DLTensor u = host_view(a, kF32, s23, 2);
            EXPECT_EQ(ds_pipe_send(w, &u, 1, 3), DS_OK) << ds_last_error();
        } else {
            DLTensor t = host_view(b, kF32, s5, 1);
            EXPECT_EQ(ds_pipe_recv(w, &t, 0, 3), DS_ERR_INVALID_ARGUMENT);
            const std::string msg = ds_last_error();
            EXPECT_NE(msg.find("rank 0 sent fp32 [4]"), std::string::npos) << msg;
            EXPECT_NE(msg.find("receiving tensor is fp32 [5]"), std::string::npos) << msg;
            EXPECT_EQ(b[0], 0.0f);  // unchanged
            DLTensor u = host_view(b, kF32, s23, 2);
            EXPECT_EQ(ds_pipe_recv(w, &u, 0, 3), DS_OK) << ds_last_error();
            for (int i = 0; i < 6; ++i) EXPECT_EQ(b[i], a[i]);
        }
        // bad arguments, named, before anything moves
        DLTensor t = host_view(a, kF32, s4, 1);
        EXPECT_EQ(ds_pipe_send(w, &t, rank, 0), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(ds_last_error()).find("peer"), std::string::npos) << ds_last_error();
        EXPECT_EQ(ds_pipe_send(w, &t, 1 - rank, 40000), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(ds_last_error()).find("tag"), std::string::npos) << ds_last_error();
        EXPECT_EQ(ds_pipe_send(w, nullptr, 1 - rank, 0), DS_ERR_INVALID_ARGUMENT);
        int64_t strides[2] = {1, 2};
        DLTensor nc = host_view(a, kF32, s23, 2);
        nc.strides = strides;
        EXPECT_EQ(ds_pipe_recv(w, &nc, 1 - rank, 0), DS_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(ds_last_error()).find("contiguous"), std::string::npos) << ds_last_error();
        EXPECT_EQ(ds_pipe_send(nullptr, &t, 1 - rank, 0), DS_ERR_INVALID_HANDLE);
    }
    EXPECT_EQ(ds_comm_finalize(w), DS_OK) << ds_last_error();
    ds_comm_destroy(w);
}

TEST(PipeP2P, AReceiveWithoutASenderTimesOut) {
    ds_comm_t* w = world_handle(1000);
    int32_t rank = 0;
    ds_comm_rank(w, &rank);
    float x[2];
    int64_t s2[1] = {2};
    DLTensor t = host_view(x, kF32, s2, 1);
    if (rank == 1) {
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_EQ(ds_pipe_recv(w, &t, 0, 9), DS_ERR_TIMEOUT) << ds_last_error();
        EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
    } else {
        // the peers' notices break this rank's communicator too
        auto c = ds::api::comm_retain(w);
        for (int i = 0; i < 200 && !c->broken(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (rank == 0) EXPECT_TRUE(c->broken());
    }
    ds_comm_destroy(w);
    MPI_Barrier(MPI_COMM_WORLD);
}

// ---------------------------------------------------------------------------
// A host-run pipeline.
// ---------------------------------------------------------------------------
namespace {

constexpr int kD = 4;   // width
constexpr int kB = 2;   // samples per micro-batch
constexpr double kLr = 0.5;
constexpr int kSteps = 3;

// Input sample value, target value, initial weight of stage s: all integers
// of the coordinates through sin/cos, the same in the reference.
double input_of(int step, int replica, int mb, int b, int i) {
    return std::sin(0.3 * step + 1.7 * replica + 0.9 * mb + 0.5 * b + 0.21 * i);
}
double target_of(int step, int replica, int mb, int b, int i) {
    return 0.5 * std::cos(0.2 * step + 1.1 * replica + 0.7 * mb + 0.3 * b + 0.37 * i);
}
double weight_of(int s, int o, int i) { return 0.6 * std::cos(1.3 * s + 0.7 * o + 0.45 * i) + (o == i ? 0.3 : 0.0); }

// float64 reference of the whole model, one process: W[s] (kD x kD), SGD on
// the mean loss over M micro-batches of every replica. Returns the losses per step.
std::vector<double> reference(int S, int D, int M, std::vector<std::vector<double>>& W) {
    W.assign(static_cast<size_t>(S), std::vector<double>(kD * kD));
    for (int s = 0; s < S; ++s)
        for (int o = 0; o < kD; ++o)
            for (int i = 0; i < kD; ++i) W[static_cast<size_t>(s)][static_cast<size_t>(o * kD + i)] = weight_of(s, o, i);
    std::vector<double> losses;
    for (int step = 0; step < kSteps; ++step) {
        std::vector<std::vector<double>> G(static_cast<size_t>(S), std::vector<double>(kD * kD, 0.0));
        double loss = 0;
        for (int r = 0; r < D; ++r)
            for (int mb = 0; mb < M; ++mb)
                for (int b = 0; b < kB; ++b) {
                    std::vector<std::vector<double>> x(static_cast<size_t>(S + 1), std::vector<double>(kD));
                    for (int i = 0; i < kD; ++i) x[0][static_cast<size_t>(i)] = input_of(step, r, mb, b, i);
                    for (int s = 0; s < S; ++s)
                        for (int o = 0; o < kD; ++o) {
                            double acc = 0;
                            for (int i = 0; i < kD; ++i)
                                acc += W[static_cast<size_t>(s)][static_cast<size_t>(o * kD + i)] * x[static_cast<size_t>(s)][static_cast<size_t>(i)];
                            x[static_cast<size_t>(s + 1)][static_cast<size_t>(o)] = std::tanh(acc);
                        }
                    std::vector<double> g(kD);
                    for (int i = 0; i < kD; ++i) {
                        const double e = x[static_cast<size_t>(S)][static_cast<size_t>(i)] - target_of(step, r, mb, b, i);
                        loss += 0.5 * e * e / (M * D);
                        g[static_cast<size_t>(i)] = e / (M * D);
                    }
                    for (int s = S - 1; s >= 0; --s) {
                        std::vector<double> dpre(kD), gin(kD, 0.0);
                        for (int o = 0; o < kD; ++o) {
                            const double y = x[static_cast<size_t>(s + 1)][static_cast<size_t>(o)];
                            dpre[static_cast<size_t>(o)] = g[static_cast<size_t>(o)] * (1 - y * y);
                        }
                        for (int o = 0; o < kD; ++o)
                            for (int i = 0; i < kD; ++i) {
                                G[static_cast<size_t>(s)][static_cast<size_t>(o * kD + i)] += dpre[static_cast<size_t>(o)] * x[static_cast<size_t>(s)][static_cast<size_t>(i)];
                                gin[static_cast<size_t>(i)] += dpre[static_cast<size_t>(o)] * W[static_cast<size_t>(s)][static_cast<size_t>(o * kD + i)];
                            }
                        g = gin;
                    }
                }
        for (int s = 0; s < S; ++s)
            for (int k = 0; k < kD * kD; ++k) W[static_cast<size_t>(s)][static_cast<size_t>(k)] -= kLr * G[static_cast<size_t>(s)][static_cast<size_t>(k)];
        losses.push_back(loss);
    }
    return losses;
}

// One stage of the pipeline, float32, driven by the schedule's instructions.
struct Stage {
    int S, s, M, replica, step = 0;
    ds_comm_t* pipe;
    ds_comm_t* data;
    std::vector<float> W, G;
    // per buffer: input, output, gradient of the output, gradient of the input, target
    std::vector<std::vector<float>> x_in, x_out, g_out, g_in, target;
    double loss = 0;

    void send(std::vector<float>& v, int peer) {
        int64_t shape[2] = {kB, kD};
        DLTensor t = host_view(v.data(), kF32, shape, 2);
        ASSERT_EQ(ds_pipe_send(pipe, &t, peer, 0), DS_OK) << ds_last_error();
    }
    void recv(std::vector<float>& v, int peer) {
        int64_t shape[2] = {kB, kD};
        DLTensor t = host_view(v.data(), kF32, shape, 2);
        ASSERT_EQ(ds_pipe_recv(pipe, &t, peer, 0), DS_OK) << ds_last_error();
    }

    void run(const ds_pipe_instr_t& in) {
        const size_t b = static_cast<size_t>(in.buffer_id);
        switch (in.type) {
            case DS_PIPE_INSTR_LOAD_MICRO_BATCH:
                for (int k = 0; k < kB; ++k)
                    for (int i = 0; i < kD; ++i) {
                        if (s == 0) x_in[b][static_cast<size_t>(k * kD + i)] = static_cast<float>(input_of(step, replica, in.micro_batch, k, i));
                        if (s == S - 1) target[b][static_cast<size_t>(k * kD + i)] = static_cast<float>(target_of(step, replica, in.micro_batch, k, i));
                    }
                break;
            case DS_PIPE_INSTR_FORWARD_PASS:
                for (int k = 0; k < kB; ++k)
                    for (int o = 0; o < kD; ++o) {
                        float acc = 0;
                        for (int i = 0; i < kD; ++i) acc += W[static_cast<size_t>(o * kD + i)] * x_in[b][static_cast<size_t>(k * kD + i)];
                        x_out[b][static_cast<size_t>(k * kD + o)] = std::tanh(acc);
                    }
                if (s == S - 1) {  // the loss and its gradient (mean over the micro-batches)
                    for (size_t j = 0; j < x_out[b].size(); ++j) {
                        const float e = x_out[b][j] - target[b][j];
                        loss += 0.5 * e * e / M;
                        g_out[b][j] = e / static_cast<float>(M);
                    }
                }
                break;
            case DS_PIPE_INSTR_BACKWARD_PASS:
                for (int k = 0; k < kB; ++k) {
                    float dpre[kD];
                    for (int o = 0; o < kD; ++o) {
                        const float y = x_out[b][static_cast<size_t>(k * kD + o)];
                        dpre[o] = g_out[b][static_cast<size_t>(k * kD + o)] * (1 - y * y);
                    }
                    for (int i = 0; i < kD; ++i) {
                        float acc = 0;
                        for (int o = 0; o < kD; ++o) {
                            G[static_cast<size_t>(o * kD + i)] += dpre[o] * x_in[b][static_cast<size_t>(k * kD + i)];
                            acc += dpre[o] * W[static_cast<size_t>(o * kD + i)];
                        }
                        g_in[b][static_cast<size_t>(k * kD + i)] = acc;
                    }
                }
                break;
            case DS_PIPE_INSTR_SEND_ACTIVATION: send(x_out[b], s + 1); break;
            case DS_PIPE_INSTR_RECV_ACTIVATION: recv(x_in[b], s - 1); break;
            case DS_PIPE_INSTR_SEND_GRAD: send(g_in[b], s - 1); break;
            case DS_PIPE_INSTR_RECV_GRAD: recv(g_out[b], s + 1); break;
            case DS_PIPE_INSTR_REDUCE_TIED_GRADS: break;  // nothing tied here
            case DS_PIPE_INSTR_REDUCE_GRADS:
                ds::api::comm_retain(data)->allreduce(G.data(), G.data(), G.size(), DType::F32, Op::Avg);
                break;
            case DS_PIPE_INSTR_OPTIMIZER_STEP:
                for (size_t k = 0; k < W.size(); ++k) W[k] -= static_cast<float>(kLr) * G[k];
                std::fill(G.begin(), G.end(), 0.0f);
                break;
            default: FAIL() << "unknown instruction " << in.type;
        }
    }
};

void run_pipeline(ds_comm_t* world, int P, int D, int M) {
    int32_t me = 0;
    ds_comm_rank(world, &me);
    ds_topology_t* topo = nullptr;
    ASSERT_EQ(ds_topology_create_pipe_data(P, D, &topo), DS_OK) << ds_last_error();
    int32_t coord[2];
    ASSERT_EQ(ds_topology_coord_of(topo, me, coord, 2), DS_OK);
    Stage st{P, coord[0], M, coord[1], 0, nullptr, nullptr, {}, {}, {}, {}, {}, {}, {}};
    ASSERT_EQ(ds_topology_comm(topo, world, "pipe", &st.pipe), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_topology_comm(topo, world, "data", &st.data), DS_OK) << ds_last_error();
    ds_pipe_schedule_t* sched = nullptr;
    ASSERT_EQ(ds_pipe_schedule_create(DS_PIPE_SCHEDULE_TRAIN, M, P, st.s, &sched), DS_OK) << ds_last_error();
    int32_t nbuf = 0;
    ds_pipe_schedule_num_buffers(sched, &nbuf);
    for (auto* v : {&st.x_in, &st.x_out, &st.g_out, &st.g_in, &st.target})
        v->assign(static_cast<size_t>(nbuf), std::vector<float>(kB * kD, 0.0f));
    st.W.resize(kD * kD);
    st.G.assign(kD * kD, 0.0f);
    for (int o = 0; o < kD; ++o)
        for (int i = 0; i < kD; ++i) st.W[static_cast<size_t>(o * kD + i)] = static_cast<float>(weight_of(st.s, o, i));

    std::vector<std::vector<double>> W;
    const std::vector<double> losses = reference(P, D, M, W);
    for (int step = 0; step < kSteps; ++step) {
        st.step = step;
        st.loss = 0;
        ds_pipe_instr_t in{};
        in.struct_size = sizeof in;
        int32_t done = 0;
        ASSERT_EQ(ds_pipe_schedule_reset(sched), DS_OK);
        for (;;) {
            ASSERT_EQ(ds_pipe_schedule_next(sched, &in, &done), DS_OK) << ds_last_error();
            if (done) break;
            st.run(in);
            if (::testing::Test::HasFatalFailure()) return;
        }
        if (st.s == P - 1) {  // the mean over the data axis, as DeepSpeed's last stage reports it
            float l = static_cast<float>(st.loss);
            ds::api::comm_retain(st.data)->allreduce(&l, &l, 1, DType::F32, Op::Avg);
            EXPECT_NEAR(l, losses[static_cast<size_t>(step)], 2e-5 * losses[static_cast<size_t>(step)] + 1e-7)
                << "pipe " << P << " x data " << D << ", M " << M << ": loss of step " << step;
        }
    }
    const std::vector<double>& ref = W[static_cast<size_t>(st.s)];
    for (size_t k = 0; k < st.W.size(); ++k)
        EXPECT_NEAR(st.W[k], ref[k], 2e-5 * std::fabs(ref[k]) + 1e-6)
            << "pipe " << P << " x data " << D << ", M " << M << ": stage " << st.s << " W[" << k << "]";
    // the weights moved: the comparison is not of two untouched copies
    EXPECT_GT(std::fabs(ref[0] - weight_of(st.s, 0, 0)), 1e-4);
    ds_pipe_schedule_destroy(sched);
    ds_comm_finalize(st.pipe);
    ds_comm_finalize(st.data);
    ds_comm_destroy(st.pipe);
    ds_comm_destroy(st.data);
    ds_topology_destroy(topo);
}

}  // namespace

TEST(PipeHostRun, EveryPipeTimesDataLayoutEqualsFloat64OneProcess) {
    ds_comm_t* w = world_handle();
    int32_t n = 0;
    ds_comm_size(w, &n);
    for (int P = 1; P <= n; ++P) {
        if (n % P) continue;
        for (int M : {1, 4, 5}) {
            run_pipeline(w, P, n / P, M);
            if (HasFatalFailure()) return;
        }
    }
    EXPECT_EQ(ds_comm_finalize(w), DS_OK) << ds_last_error();
    ds_comm_destroy(w);
}
