// An engine on cuda:N with a stream (options.cuda_stream,
// ds_engine_set_stream) queues its device work on the legacy default stream
// and orders it against the caller's stream around every exclusive ds_* call
// (Engine::call_begins / call_ends): first the legacy stream waits for what
// the caller queued before the call, at the end the caller's stream waits for
// the engine's work; the host never waits for either. A failed call is
// ordered too (its partial work may be queued). Checked on the host-backed
// device, which records every ordering as a (waiter, signaler) pair; that the
// orderings hold on a real GPU is tests/gpu/test_gpu_engine.c.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "deepspeed_c.h"
#include "host_backed_device.h"

namespace {

using Order = std::pair<void*, void*>;  // (waiter, signaler); nullptr: the legacy default stream
void* const kS = reinterpret_cast<void*>(0x51);
void* const kT = reinterpret_cast<void*>(0x52);
const DLDevice kCuda0{kDLCUDA, 0};

// One exclusive call on an engine whose stream is s.
std::vector<Order> around(void* s) { return {{nullptr, s}, {s, nullptr}}; }

const char* const kResident = R"({"train_batch_size": 2, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
    "zero_optimization": {"stage": 1}})";

ds_engine_t* create_on_stream(const char* json, void* stream) {
    ds_engine_options_t o;
    ds_engine_options_init(&o, sizeof o);
    o.device = kCuda0;
    o.cuda_stream = stream;
    ds_engine_t* e = nullptr;
    EXPECT_EQ(ds_engine_create(json, &o, &e), DS_OK) << ds_last_error();
    return e;
}

struct EngineGuard {
    ds_engine_t* e;
    ~EngineGuard() { ds_engine_destroy(e); }
};

TEST(EngineStreamOrder, EveryExclusiveCallIsOrderedBothWays) {
    test_device::HostBackedDevice device;
    EngineGuard g{create_on_stream(kResident, kS)};
    ASSERT_NE(g.e, nullptr);
    EXPECT_EQ(device.take_orders(), (std::vector<Order>{{kS, nullptr}}));  // creation's copies before the caller's

    std::vector<float> w{1, 2, 3, 4, 5, 6}, grad{0.5f, -1, 2, 0, 1, -2};
    int64_t shape[1] = {6};
    DLTensor wt{w.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
    ASSERT_EQ(ds_engine_add_param(g.e, "w", &wt, DS_PARAM_TRAINABLE), DS_OK) << ds_last_error();
    EXPECT_EQ(device.take_orders(), around(kS));
    ASSERT_EQ(ds_engine_init(g.e), DS_OK) << ds_last_error();
    EXPECT_EQ(device.take_orders(), around(kS));

    DLTensor gt{grad.data(), kCuda0, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};  // "device" memory on this device
    ASSERT_EQ(ds_engine_accumulate_grad(g.e, "w", &gt), DS_OK) << ds_last_error();
    EXPECT_EQ(device.take_orders(), around(kS));
    ASSERT_EQ(ds_backward(g.e, nullptr), DS_OK) << ds_last_error();
    EXPECT_EQ(device.take_orders(), around(kS));
    ASSERT_EQ(ds_step(g.e, nullptr), DS_OK) << ds_last_error();
    EXPECT_EQ(device.take_orders(), around(kS));

    // A const getter queues nothing and is not ordered.
    float scale = 0.0f;
    ASSERT_EQ(ds_engine_loss_scale(g.e, &scale), DS_OK);
    EXPECT_TRUE(device.take_orders().empty());

    // A refused call is ordered both ways too.
    DLTensor host_grad = gt;
    host_grad.device = {kDLCPU, 0};
    EXPECT_EQ(ds_engine_accumulate_grad(g.e, "w", &host_grad), DS_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(device.take_orders(), around(kS));

    // A new stream: the call that sets it waits for the old one and makes the new one wait.
    ASSERT_EQ(ds_engine_set_stream(g.e, kT), DS_OK) << ds_last_error();
    EXPECT_EQ(device.take_orders(), (std::vector<Order>{{nullptr, kS}, {kT, nullptr}}));
    ASSERT_EQ(ds_engine_accumulate_grad(g.e, "w", &gt), DS_OK) << ds_last_error();
    EXPECT_EQ(device.take_orders(), around(kT));
    // Back to the legacy default stream: nothing left to order.
    ASSERT_EQ(ds_engine_set_stream(g.e, nullptr), DS_OK) << ds_last_error();
    EXPECT_EQ(device.take_orders(), (std::vector<Order>{{nullptr, kT}}));
    ASSERT_EQ(ds_backward(g.e, nullptr), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_step(g.e, nullptr), DS_OK) << ds_last_error();
    EXPECT_TRUE(device.take_orders().empty());
}

// A built-in model on a stream: ds_forward and ds_backward are ordered like
// every other call, and training gives what it gives without a stream.
TEST(EngineStreamOrder, ModelOnAStreamTrainsAsWithout) {
    test_device::HostBackedDevice device;
    const char* spec = R"({"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 1, "n_head": 2,
        "n_embd": 8, "dropout": 0.1, "seed": 3})";
    const char* json = R"({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true},
        "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}, "zero_optimization": {"stage": 2}})";
    std::vector<float> losses[2];
    for (int with_stream = 0; with_stream < 2; ++with_stream) {
        ds_model_t* m = nullptr;
        ASSERT_EQ(ds_model_create(spec, &m), DS_OK) << ds_last_error();
        ds_engine_options_t o;
        ds_engine_options_init(&o, sizeof o);
        o.device = kCuda0;
        o.cuda_stream = with_stream ? kS : nullptr;
        ds_engine_t* e = nullptr;
        ASSERT_EQ(ds_engine_create_with_model(json, m, &o, &e), DS_OK) << ds_last_error();
        ds_model_destroy(m);
        EngineGuard g{e};
        device.take_orders();
        std::vector<int32_t> ids(16), targets(16);
        int64_t shape[2] = {2, 8};
        for (int step = 0; step < 3; ++step) {
            for (int i = 0; i < 16; ++i) {
                ids[i] = (i * 3 + step) % 16;
                targets[i] = (i * 5 + 1 + step) % 16;
            }
            DLTensor in[2] = {{ids.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0},
                              {targets.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0}};
            float loss = 0.0f;
            DLTensor lo{&loss, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
            ASSERT_EQ(ds_forward(e, in, 2, &lo), DS_OK) << ds_last_error();
            EXPECT_EQ(device.take_orders(), with_stream ? around(kS) : std::vector<Order>{});
            ASSERT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
            EXPECT_EQ(device.take_orders(), with_stream ? around(kS) : std::vector<Order>{});
            ASSERT_EQ(ds_step(e, nullptr), DS_OK) << ds_last_error();
            device.take_orders();
            losses[with_stream].push_back(loss);
        }
    }
    EXPECT_EQ(losses[0], losses[1]);
}

}  // namespace
