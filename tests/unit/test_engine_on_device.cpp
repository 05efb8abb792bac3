// Engines on cuda:N, run on a host-backed device (host_backed_device.h) so
// they are tested in every CI run, where the "device" kernels are the CPU's:
// - ZeRO-Offload (engine/device_front.h): its optimizer and fp32 state are
//   the CPU engine's, its device weights (ds_engine_param_view) must be the
//   host working weights after every step, load and set_full;
// - device-resident (zero/flat_device.cpp): every buffer on the device,
//   parked on the host for checkpoints and full copies.
// With the same gradients both must produce the CPU engine's weights bit for
// bit. What only a GPU shows (the CUDA kernels, the copies' ordering on a
// real stream) is tests/gpu/test_gpu_engine_offload.c.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "api_test_util.h"
#include "deepspeed_c.h"
#include "host_backed_device.h"

namespace {

struct Spec {
    const char* dtype;  // "fp32", "bf16", "fp16"
    int stage;
    int gas;
    // offload_optimizer.device: "cpu" or "nvme" (swap files in nvme_dir()): ZeRO-Offload; "none": no
    // offload section, a device-resident engine.
    const char* offload = "cpu";
    // offload_param.device (stage 3), or none.
    const char* param_offload = nullptr;
};

// A directory for the NVMe swap files of this process's engines (removed after each test).
std::string nvme_dir() {
    const auto p = std::filesystem::temp_directory_path() / ("ds_engine_on_device_nvme_" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p.string();
}

void PrintTo(const Spec& s, std::ostream* os) {
    *os << s.dtype << " stage " << s.stage << " gas " << s.gas << " offload " << s.offload
        << (s.param_offload ? std::string(" param offload ") + s.param_offload : "");
}

std::string config(const Spec& s, bool offload = true) {
    std::string c = "{\"train_batch_size\": " + std::to_string(2 * s.gas) +
                    ", \"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": " +
                    std::to_string(s.gas) + ", \"gradient_clipping\": 1.0,"
                    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}},"
                    " \"zero_optimization\": {\"stage\": " + std::to_string(s.stage);
    if (offload && std::string(s.offload) != "none") {
        c += std::string(", \"offload_optimizer\": {\"device\": \"") + s.offload + "\"";
        if (std::string(s.offload) == "nvme") c += ", \"nvme_path\": \"" + nvme_dir() + "\"";
        c += "}";
    }
    if (s.param_offload) {
        c += std::string(", \"offload_param\": {\"device\": \"") + s.param_offload + "\"";
        if (std::string(s.param_offload) == "nvme") c += ", \"nvme_path\": \"" + nvme_dir() + "\"";
        c += "}";
    }
    c += "}";
    if (std::string(s.dtype) == "bf16") c += ", \"bf16\": {\"enabled\": true}";
    if (std::string(s.dtype) == "fp16") c += ", \"fp16\": {\"enabled\": true, \"initial_scale_power\": 4}";
    return c + "}";
}

ds_engine_t* create(const std::string& json, DLDevice device, ds_status_t* status = nullptr) {
    ds_engine_options_t o;
    ds_engine_options_init(&o, sizeof o);
    o.device = device;
    ds_engine_t* e = nullptr;
    const ds_status_t s = ds_engine_create(json.c_str(), &o, &e);
    if (status) *status = s;
    else EXPECT_EQ(s, DS_OK) << ds_last_error();
    return e;
}

struct EngineGuard {
    ds_engine_t* e;
    ~EngineGuard() { ds_engine_destroy(e); }
};

DLTensor f32_on(float* data, int64_t* shape, int32_t ndim, DLDevice device) {
    DLTensor t = api_test::f32_tensor(data, shape, ndim);
    t.device = device;
    return t;
}

const DLDevice kCuda0{kDLCUDA, 0};
const DLDevice kCpu{kDLCPU, 0};

// Two trainable parameters, a matrix and a bias (odd sizes, so the flat
// layout pads), and a frozen one.
struct Model {
    std::vector<int64_t> wshape{7, 5}, bshape{3}, fshape{4};
    std::vector<float> w, b, f{0.5f, -1.25f, 3.0f, 0.1f};
    Model() {
        for (int i = 0; i < 35; ++i) w.push_back(std::sin(0.7f * static_cast<float>(i)) * 0.5f);
        for (int i = 0; i < 3; ++i) b.push_back(0.1f * static_cast<float>(i) - 0.1f);
    }
    void add_to(ds_engine_t* e, DLDevice init_device) {
        DLTensor tw = f32_on(w.data(), wshape.data(), 2, init_device);
        DLTensor tb = f32_on(b.data(), bshape.data(), 1, init_device);
        DLTensor tf = f32_on(f.data(), fshape.data(), 1, init_device);
        ASSERT_EQ(ds_engine_add_param(e, "w", &tw, DS_PARAM_TRAINABLE), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_engine_add_param(e, "b", &tb, DS_PARAM_TRAINABLE), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_engine_add_param(e, "f", &tf, 0), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_engine_init(e), DS_OK) << ds_last_error();
    }
    const std::vector<int64_t>& shape(const std::string& n) const { return n == "w" ? wshape : n == "b" ? bshape : fshape; }
};

const char* const kNames[] = {"w", "b", "f"};

// An engine on cuda:0 (`d`) and a CPU engine (`c`) with the same config, each
// with its own copy of the model (host initial values).
struct EnginePair {
    Model md, mc;
    EngineGuard d, c;
    explicit EnginePair(const std::string& json) : d{create(json, kCuda0)}, c{create(json, kCpu)} {
        md.add_to(d.e, kCpu);
        mc.add_to(c.e, kCpu);
    }
};

// A directory path for this process (`tag` + pid), removed if it exists.
std::string fresh_dir(const char* tag) {
    const std::string dir =
        (std::filesystem::temp_directory_path() / (std::string(tag) + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir);
    return dir;
}

// The gradient of micro-step `k` for a parameter of n elements (a fixed
// pattern; `inf` puts an Inf in it, to make an fp16 step overflow).
std::vector<float> grad(int k, size_t n, float salt, bool inf = false) {
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i)
        g[i] = std::cos(0.37f * static_cast<float>(i) + salt + 1.3f * static_cast<float>(k)) * 0.8f;
    if (inf) g[n / 2] = INFINITY;
    return g;
}

void micro_step(ds_engine_t* e, Model& m, int k, DLDevice grad_device, bool inf = false) {
    std::vector<float> gw = grad(k, m.w.size(), 0.0f, inf), gb = grad(k, m.b.size(), 2.0f);
    DLTensor tw = f32_on(gw.data(), m.wshape.data(), 2, grad_device);
    DLTensor tb = f32_on(gb.data(), m.bshape.data(), 1, grad_device);
    ASSERT_EQ(ds_engine_accumulate_grad(e, "w", &tw), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_engine_accumulate_grad(e, "b", &tb), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_step(e, nullptr), DS_OK) << ds_last_error();
}

// The bytes of a parameter's working weights as ds_engine_param_view shows them.
std::vector<unsigned char> view_bytes(ds_engine_t* e, const char* name, DLDevice expect_device, uint8_t bits) {
    DLTensor v;
    EXPECT_EQ(ds_engine_param_view(e, name, &v), DS_OK) << ds_last_error();
    EXPECT_EQ(v.device.device_type, expect_device.device_type) << name;
    EXPECT_EQ(v.device.device_id, expect_device.device_id) << name;
    EXPECT_EQ(v.dtype.bits, bits) << name;
    size_t n = 1;
    for (int d = 0; d < v.ndim; ++d) n *= static_cast<size_t>(v.shape[d]);
    const auto* p = static_cast<const unsigned char*>(v.data) + v.byte_offset;
    return std::vector<unsigned char>(p, p + n * bits / 8);  // host-backed: readable here
}

std::vector<float> full_param(ds_engine_t* e, const char* name, std::vector<int64_t> shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> out(n);
    DLTensor t = api_test::f32_tensor(out.data(), shape.data(), static_cast<int32_t>(shape.size()));
    EXPECT_EQ(ds_engine_get_full_fp32_param(e, name, &t), DS_OK) << ds_last_error();
    return out;
}

// ds_engine_set_full_fp32_param of "b" = 1.0 reaches the (bf16) device weights.
void set_b_to_ones_and_check_device(ds_engine_t* e) {
    std::vector<float> ones(3, 1.0f);
    int64_t shape = 3;
    DLTensor t = api_test::f32_tensor(ones.data(), &shape, 1);
    ASSERT_EQ(ds_engine_set_full_fp32_param(e, "b", &t), DS_OK) << ds_last_error();
    const std::vector<unsigned char> vb = view_bytes(e, "b", kCuda0, 16);
    for (size_t i = 0; i < 3; ++i) {  // bf16 1.0 = 0x3F80, little-endian
        EXPECT_EQ(vb[2 * i], 0x80);
        EXPECT_EQ(vb[2 * i + 1], 0x3F);
    }
}

class EngineOnDevice : public ::testing::TestWithParam<Spec> {
protected:
    void TearDown() override { std::filesystem::remove_all(nvme_dir()); }  // the engines are gone by now
    test_device::HostBackedDevice device_;
};

// Same gradients, same steps (an overflowing one included for fp16): the
// device engine's fp32 master weights equal the CPU engine's bit for bit, and
// its device working weights equal the CPU engine's working weights.
TEST_P(EngineOnDevice, TrainsLikeTheCpuEngine) {
    const Spec s = GetParam();
    const uint8_t bits = std::string(s.dtype) == "fp32" ? 32 : 16;
    Model mc, md;
    // A device-resident ZeRO-3 with its parameters in host memory (or on
    // NVMe) runs stage 3 in a world of one (its gathers are device copies),
    // which accumulates in buckets: the CPU engine that runs stage 3 there is
    // the one with its parameters on NVMe.
    Spec cpu_spec = s;
    if (s.param_offload && std::string(s.param_offload) == "cpu") cpu_spec.param_offload = "nvme";
    EngineGuard cpu{create(config(cpu_spec), kCpu)};
    EngineGuard dev{create(config(s), kCuda0)};
    ASSERT_NE(cpu.e, nullptr);
    ASSERT_NE(dev.e, nullptr);
    mc.add_to(cpu.e, kCpu);
    md.add_to(dev.e, kCuda0);  // the initial values from device memory too
    for (const char* n : kNames)
        EXPECT_EQ(view_bytes(dev.e, n, kCuda0, bits), view_bytes(cpu.e, n, kCpu, bits)) << n << " after init";
    const bool fp16 = std::string(s.dtype) == "fp16";
    for (int k = 0; k < 4 * s.gas; ++k) {
        const bool inf = fp16 && k == s.gas;  // the second window overflows: skipped, scale halved
        micro_step(cpu.e, mc, k, kCpu, inf);
        micro_step(dev.e, md, k, kCuda0, inf);
        for (const char* n : kNames) {
            EXPECT_EQ(view_bytes(dev.e, n, kCuda0, bits), view_bytes(cpu.e, n, kCpu, bits))
                << n << " after micro-step " << k;
            const std::vector<int64_t>& shape = mc.shape(n);
            const std::vector<float> a = full_param(cpu.e, n, shape), b = full_param(dev.e, n, shape);
            EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << n << " after micro-step " << k;
        }
    }
    int64_t skipped = -1;
    ASSERT_EQ(ds_engine_skipped_steps(dev.e, &skipped), DS_OK);
    EXPECT_EQ(skipped, fp16 ? 1 : 0);
    // The weights moved (the test is not comparing two untouched copies).
    EXPECT_NE(full_param(dev.e, "w", md.wshape), md.w);
}

INSTANTIATE_TEST_SUITE_P(Precisions, EngineOnDevice,
                         ::testing::Values(Spec{"fp32", 1, 1}, Spec{"fp32", 2, 2}, Spec{"bf16", 2, 1},
                                           Spec{"bf16", 1, 2}, Spec{"fp16", 2, 2}, Spec{"fp16", 1, 1},
                                           Spec{"bf16", 2, 2, "nvme"}, Spec{"fp32", 0, 1, "none"},
                                           Spec{"fp32", 2, 2, "none"}, Spec{"bf16", 1, 2, "none"},
                                           Spec{"bf16", 0, 1, "none"}, Spec{"fp16", 0, 2, "none"},
                                           Spec{"fp16", 2, 1, "none"}, Spec{"bf16", 3, 2, "none"},
                                           Spec{"fp32", 3, 1, "none"}, Spec{"bf16", 3, 1, "cpu"},
                                           Spec{"bf16", 3, 2, "none", "cpu"}, Spec{"fp16", 3, 1, "none", "cpu"},
                                           Spec{"fp32", 3, 2, "none", "cpu"}, Spec{"bf16", 3, 2, "none", "nvme"},
                                           Spec{"fp32", 3, 1, "none", "nvme"}, Spec{"fp16", 3, 1, "none", "nvme"}),
                         [](const ::testing::TestParamInfo<Spec>& i) {
                             return std::string(i.param.dtype) + "_stage" + std::to_string(i.param.stage) + "_gas" +
                                    std::to_string(i.param.gas) + "_" + i.param.offload +
                                    (i.param.param_offload ? std::string("_params_") + i.param.param_offload : "");
                         });

// After ds_load_checkpoint and ds_engine_set_full_fp32_param the device
// weights are the host's new ones.
TEST(EngineOnDeviceState, LoadAndSetFullReachTheDevice) {
    test_device::HostBackedDevice device;
    const Spec s{"bf16", 2, 1};
    const std::string dir = fresh_dir("ds_engine_on_device_");
    Model m1, m2;
    std::vector<unsigned char> saved_w;
    {
        EngineGuard a{create(config(s), kCuda0)};
        m1.add_to(a.e, kCpu);
        for (int k = 0; k < 3; ++k) micro_step(a.e, m1, k, kCuda0);
        saved_w = view_bytes(a.e, "w", kCuda0, 16);
        ASSERT_EQ(ds_save_checkpoint(a.e, dir.c_str(), "t", nullptr), DS_OK) << ds_last_error();
    }
    EngineGuard b{create(config(s), kCuda0)};
    m2.add_to(b.e, kCpu);
    ASSERT_NE(view_bytes(b.e, "w", kCuda0, 16), saved_w);
    ASSERT_EQ(ds_load_checkpoint(b.e, dir.c_str(), "t", 0, nullptr), DS_OK) << ds_last_error();
    EXPECT_EQ(view_bytes(b.e, "w", kCuda0, 16), saved_w);

    set_b_to_ones_and_check_device(b.e);
    std::filesystem::remove_all(dir);
}

bool message_has(const char* part) { return std::strstr(ds_last_error(), part) != nullptr; }

// What an engine on cuda:N refuses, each with a status and a message naming it.
TEST(EngineOnDeviceState, Refusals) {
    test_device::HostBackedDevice device;
    const Spec s{"fp32", 2, 1};
    ds_status_t st = DS_OK;
    ds_engine_t* e = create(config(Spec{"fp32", 0, 1, "cpu"}), kCuda0, &st);  // ZeRO-Offload at stage 0
    EXPECT_EQ(e, nullptr);
    EXPECT_EQ(st, DS_ERR_UNSUPPORTED);
    EXPECT_TRUE(message_has("stage 1 or above")) << ds_last_error();
    // Stage 3 in a world of one is accepted (EngineOnDevice covers it), with parameters offloaded to the
    // host or to NVMe in both modes (tests/mpi/test_engine_on_device_ranks.cpp trains them on several ranks).
    for (const char* offload : {"cpu", "none"})
        for (const char* param_device : {"cpu", "nvme"}) {
            std::string with_param_offload = config(Spec{"fp32", 3, 1, offload});
            with_param_offload.insert(with_param_offload.find("\"stage\": 3") + 10,
                                      std::string(", \"offload_param\": {\"device\": \"") + param_device +
                                          "\", \"nvme_path\": \"" + nvme_dir() + "\"}");
            e = create(with_param_offload, kCuda0, &st);
            EXPECT_EQ(st, DS_OK) << offload << " " << param_device << ": " << ds_last_error();
            ds_engine_destroy(e);
        }
    e = create(config(s), DLDevice{kDLCUDA, -1}, &st);
    EXPECT_EQ(st, DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(message_has("negative")) << ds_last_error();

    ds_engine_options_t o;
    ds_engine_options_init(&o, sizeof o);
    o.cuda_stream = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(ds_engine_create(config(s).c_str(), &o, &e), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(message_has("options.cuda_stream")) << ds_last_error();
    {
        EngineGuard r{create(config(Spec{"fp32", 2, 1, "none"}), kCuda0)};
        Model m;
        m.add_to(r.e, kCpu);
        EXPECT_EQ(ds_engine_offload_states(r.e, 0, DS_OFFLOAD_DEVICE_CPU, nullptr), DS_ERR_UNSUPPORTED);
    }

    EngineGuard d{create(config(s), kCuda0)};
    Model m;
    m.add_to(d.e, kCpu);
    EXPECT_EQ(ds_engine_set_stream(d.e, reinterpret_cast<void*>(0x1)), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_engine_set_stream(d.e, nullptr), DS_OK) << ds_last_error();
    DLTensor v;
    EXPECT_EQ(ds_engine_grad_view(d.e, "w", &v), DS_ERR_UNSUPPORTED);
    EXPECT_TRUE(message_has("ds_engine_accumulate_grad")) << ds_last_error();
    std::vector<float> g(35, 1.0f);
    DLTensor host_grad = f32_on(g.data(), m.wshape.data(), 2, kCpu);
    EXPECT_EQ(ds_engine_accumulate_grad(d.e, "w", &host_grad), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(message_has("cuda:0")) << ds_last_error();
    int64_t strides[2] = {1, 7};  // column-major
    DLTensor strided = f32_on(g.data(), m.wshape.data(), 2, kCuda0);
    strided.strides = strides;
    EXPECT_EQ(ds_engine_accumulate_grad(d.e, "w", &strided), DS_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(message_has("contiguous")) << ds_last_error();
    EXPECT_EQ(ds_engine_offload_states(d.e, 0, DS_OFFLOAD_DEVICE_CPU, nullptr), DS_ERR_UNSUPPORTED);
    // The engine is still usable after the refusals.
    micro_step(d.e, m, 0, kCuda0);

    EngineGuard c{create(config(s), kCpu)};
    EXPECT_EQ(ds_engine_set_stream(c.e, nullptr), DS_ERR_INVALID_STATE);
    EXPECT_TRUE(message_has("trains on the CPU")) << ds_last_error();
}

}  // namespace

namespace {

// A device-resident engine: views taken once stay valid across the calls that
// park its buffers on the host (checkpoints); a checkpoint it
// writes loads into a CPU engine and back, and set_full reaches the device;
// gradients written straight into ds_engine_grad_view (device memory) train
// as ds_engine_accumulate_grad does.
TEST(EngineOnDeviceResident, ViewsCheckpointsAndGradViews) {
    test_device::HostBackedDevice device;
    const Spec s{"bf16", 1, 1, "none"};
    const std::string dir = fresh_dir("ds_engine_resident_");
    EnginePair p(config(s));
    DLTensor w0, g0;
    ASSERT_EQ(ds_engine_param_view(p.d.e, "w", &w0), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_engine_grad_view(p.d.e, "w", &g0), DS_OK) << ds_last_error();
    EXPECT_EQ(g0.device.device_type, kDLCUDA);
    for (int k = 0; k < 2; ++k) {
        micro_step(p.d.e, p.md, k, kCuda0);
        micro_step(p.c.e, p.mc, k, kCpu);
    }
    ASSERT_EQ(ds_save_checkpoint(p.d.e, dir.c_str(), "t", nullptr), DS_OK) << ds_last_error();
    (void)full_param(p.d.e, "w", p.md.wshape);
    DLTensor w1;
    ASSERT_EQ(ds_engine_param_view(p.d.e, "w", &w1), DS_OK) << ds_last_error();
    EXPECT_EQ(w1.data, w0.data);  // the device buffers never moved
    EXPECT_EQ(w1.device.device_type, kDLCUDA);

    // The resident engine's checkpoint in a CPU engine: the same weights.
    {
        Model m2;
        EngineGuard c2{create(config(s), kCpu)};
        m2.add_to(c2.e, kCpu);
        ASSERT_EQ(ds_load_checkpoint(c2.e, dir.c_str(), "t", 0, nullptr), DS_OK) << ds_last_error();
        for (const char* n : kNames) EXPECT_EQ(view_bytes(c2.e, n, kCpu, 16), view_bytes(p.d.e, n, kCuda0, 16)) << n;
    }
    // Micro-step 2 by writing the gradient into the views (the gradient of the
    // loss times ds_engine_loss_multiplier), on both engines.
    for (ds_engine_t* e : {p.d.e, p.c.e}) {
        for (const char* n : {"w", "b"}) {
            DLTensor g;
            ASSERT_EQ(ds_engine_grad_view(e, n, &g), DS_OK) << ds_last_error();
            ASSERT_EQ(g.dtype.bits, 16);  // bf16 gradients
            size_t numel = 1;
            for (int d = 0; d < g.ndim; ++d) numel *= static_cast<size_t>(g.shape[d]);
            auto* bits = static_cast<uint16_t*>(g.data);
            for (size_t i = 0; i < numel; ++i) bits[i] = static_cast<uint16_t>(0x3C00 + (i % 7) * 0x40);  // small bf16
        }
        ASSERT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_step(e, nullptr), DS_OK) << ds_last_error();
    }
    for (const char* n : kNames) EXPECT_EQ(view_bytes(p.d.e, n, kCuda0, 16), view_bytes(p.c.e, n, kCpu, 16)) << n;

    // Back to the checkpoint on the resident engine, then set_full: the device sees both.
    ASSERT_EQ(ds_load_checkpoint(p.d.e, dir.c_str(), "t", 0, nullptr), DS_OK) << ds_last_error();
    {
        Model m3;
        EngineGuard c3{create(config(s), kCpu)};
        m3.add_to(c3.e, kCpu);
        ASSERT_EQ(ds_load_checkpoint(c3.e, dir.c_str(), "t", 0, nullptr), DS_OK) << ds_last_error();
        for (const char* n : kNames) EXPECT_EQ(view_bytes(p.d.e, n, kCuda0, 16), view_bytes(c3.e, n, kCpu, 16)) << n;
        micro_step(p.d.e, p.md, 7, kCuda0);  // and they train alike from there
        micro_step(c3.e, m3, 7, kCpu);
        for (const char* n : kNames) EXPECT_EQ(view_bytes(p.d.e, n, kCuda0, 16), view_bytes(c3.e, n, kCpu, 16)) << n;
    }
    set_b_to_ones_and_check_device(p.d.e);
    std::filesystem::remove_all(dir);
}

}  // namespace

namespace {

// A parameter's full fp32 gradient or optimizer state ("" key: the gradient).
std::vector<float> full_of(ds_engine_t* e, const char* name, const std::vector<int64_t>& shape, const char* key) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> out(n);
    std::vector<int64_t> sh = shape;
    DLTensor t = api_test::f32_tensor(out.data(), sh.data(), static_cast<int32_t>(sh.size()));
    const ds_status_t s = *key ? ds_engine_get_full_optimizer_state(e, name, key, &t) : ds_engine_get_full_grad(e, name, &t);
    EXPECT_EQ(s, DS_OK) << ds_last_error();
    return out;
}

// A device-resident engine's full copies move only the parameter asked for,
// across the dtypes its buffers hold (fp32 master and state, bf16 working
// weights and gradients), and read and write what a CPU engine does.
TEST(EngineOnDeviceResident, FullCopiesMoveOneParameter) {
    test_device::HostBackedDevice device;
    const Spec s{"bf16", 2, 2, "none"};
    EnginePair p(config(s));
    for (int k = 0; k < 3; ++k) {  // two applied steps, and a window half accumulated
        micro_step(p.d.e, p.md, k, kCuda0);
        micro_step(p.c.e, p.mc, k, kCpu);
    }
    device.reset_counts();
    EXPECT_EQ(full_param(p.d.e, "b", p.md.bshape), full_param(p.c.e, "b", p.mc.bshape));
    EXPECT_EQ(device.copies_from_device(), 1);
    EXPECT_EQ(device.bytes_from_device(), 3u * 4);  // b's fp32 master, not the model
    EXPECT_EQ(device.copies_to_device(), 0);
    for (const char* key : {"", "exp_avg", "exp_avg_sq"})
        for (const char* n : {"w", "b"}) {
            const std::vector<float> a = full_of(p.d.e, n, p.md.shape(n), key), b = full_of(p.c.e, n, p.mc.shape(n), key);
            EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << n << " " << key;
        }
    EXPECT_NE(full_of(p.c.e, "w", p.mc.wshape, ""), std::vector<float>(35, 0.0f));  // a window in progress

    // Writes: the value rounded as the CPU engine rounds it, one parameter's bytes moved.
    std::vector<float> v(3);
    for (int i = 0; i < 3; ++i) v[i] = 0.3f + 0.0123f * static_cast<float>(i);  // not representable in bf16
    int64_t bshape = 3;
    DLTensor t = api_test::f32_tensor(v.data(), &bshape, 1);
    device.reset_counts();
    for (ds_engine_t* e : {p.d.e, p.c.e}) {
        ASSERT_EQ(ds_engine_set_full_fp32_param(e, "b", &t), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_engine_set_full_grad(e, "b", &t), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_engine_set_full_optimizer_state(e, "b", "exp_avg", &t), DS_OK) << ds_last_error();
    }
    EXPECT_EQ(device.bytes_to_device(), 3u * (4 + 2) + 3u * 2 + 3u * 4);  // master + working, bf16 grad, fp32 state
    EXPECT_EQ(device.copies_from_device(), 0);
    for (const char* n : kNames) EXPECT_EQ(view_bytes(p.d.e, n, kCuda0, 16), view_bytes(p.c.e, n, kCpu, 16)) << n;
    micro_step(p.d.e, p.md, 3, kCuda0);  // the window closes with the written gradient and state
    micro_step(p.c.e, p.mc, 3, kCpu);
    for (const char* n : kNames) {
        EXPECT_EQ(view_bytes(p.d.e, n, kCuda0, 16), view_bytes(p.c.e, n, kCpu, 16)) << n;
        const std::vector<float> a = full_param(p.d.e, n, p.md.shape(n)), b = full_param(p.c.e, n, p.mc.shape(n));
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << n;
    }
}

// ZeRO-Offload: a step sends the trained weights to the device in one copy
// (the twin of the flat working buffer; the frozen parameter stays), a
// set_full only that parameter's, a load every parameter's.
TEST(EngineOnDeviceState, DeviceWeightsMoveInOneCopy) {
    test_device::HostBackedDevice device;
    const Spec s{"bf16", 2, 1};
    const std::string dir = fresh_dir("ds_engine_on_device_copies_");
    Model m;
    EngineGuard e{create(config(s), kCuda0)};
    m.add_to(e.e, kCpu);
    std::vector<float> gw = grad(0, m.w.size(), 0.0f), gb = grad(0, m.b.size(), 2.0f);
    DLTensor tw = f32_on(gw.data(), m.wshape.data(), 2, kCuda0), tb = f32_on(gb.data(), m.bshape.data(), 1, kCuda0);
    ASSERT_EQ(ds_engine_accumulate_grad(e.e, "w", &tw), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_engine_accumulate_grad(e.e, "b", &tb), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_backward(e.e, nullptr), DS_OK) << ds_last_error();
    device.reset_counts();
    ASSERT_EQ(ds_step(e.e, nullptr), DS_OK) << ds_last_error();
    EXPECT_EQ(device.copies_to_device(), 1);
    EXPECT_GE(device.bytes_to_device(), (35u + 3u) * 2);  // the bf16 flat buffer (with its padding)
    EXPECT_LT(device.bytes_to_device(), (35u + 3u) * 2 + 1024);

    ASSERT_EQ(ds_save_checkpoint(e.e, dir.c_str(), "t", nullptr), DS_OK) << ds_last_error();
    device.reset_counts();
    set_b_to_ones_and_check_device(e.e);
    EXPECT_EQ(device.copies_to_device(), 1);
    EXPECT_EQ(device.bytes_to_device(), 3u * 2);

    device.reset_counts();
    ASSERT_EQ(ds_load_checkpoint(e.e, dir.c_str(), "t", 0, nullptr), DS_OK) << ds_last_error();
    EXPECT_EQ(device.copies_to_device(), 2);  // the flat twin and the frozen "f"
    EXPECT_NE(view_bytes(e.e, "b", kCuda0, 16), std::vector<unsigned char>(6, 0));
    std::filesystem::remove_all(dir);
}

struct LogCapture {
    std::string text;
    static void sink(int32_t, const char* message, void* user) {
        static_cast<LogCapture*>(user)->text += std::string(message) + "\n";
    }
    LogCapture() { ds_set_log_callback(sink, this); }
    ~LogCapture() { ds_set_log_callback(nullptr, nullptr); }
};

// A device-resident engine whose buffers cannot go back to the device after
// a load (the second copy fails) keeps its state on the host, whole, says
// so, and the next call that needs the device copies it back: the engine
// then holds the checkpoint's state and trains as a CPU engine from it.
TEST(EngineOnDeviceResident, FailedCopyBackIsRetried) {
    test_device::HostBackedDevice device;
    const Spec s{"bf16", 1, 1, "none"};
    const std::string dir = fresh_dir("ds_engine_resident_retry_");
    EnginePair p(config(s));
    micro_step(p.d.e, p.md, 0, kCuda0);
    ASSERT_EQ(ds_save_checkpoint(p.d.e, dir.c_str(), "t", nullptr), DS_OK) << ds_last_error();
    micro_step(p.d.e, p.md, 1, kCuda0);  // the device state moves on from the checkpoint
    ASSERT_EQ(ds_load_checkpoint(p.c.e, dir.c_str(), "t", 0, nullptr), DS_OK) << ds_last_error();
    {
        LogCapture log;
        device.fail_copy_to_device_after(1);  // the master goes back, the working weights do not
        EXPECT_EQ(ds_load_checkpoint(p.d.e, dir.c_str(), "t", 0, nullptr), DS_OK) << ds_last_error();
        EXPECT_NE(log.text.find("stay in host memory"), std::string::npos) << log.text;
        EXPECT_NE(log.text.find("injected failure"), std::string::npos) << log.text;
    }
    device.reset_counts();
    EXPECT_EQ(full_param(p.d.e, "w", p.md.wshape), full_param(p.c.e, "w", p.mc.wshape));  // read from the host copies
    EXPECT_EQ(device.copies_to_device() + device.copies_from_device(), 0);
    for (const char* n : kNames) EXPECT_EQ(view_bytes(p.d.e, n, kCuda0, 16), view_bytes(p.c.e, n, kCpu, 16)) << n;
    EXPECT_GT(device.copies_to_device(), 0);  // the views brought the state back
    for (int k = 2; k < 4; ++k) {
        micro_step(p.d.e, p.md, k, kCuda0);
        micro_step(p.c.e, p.mc, k, kCpu);
        for (const char* n : kNames) EXPECT_EQ(view_bytes(p.d.e, n, kCuda0, 16), view_bytes(p.c.e, n, kCpu, 16)) << n;
    }
    std::filesystem::remove_all(dir);
}

// offload_optimizer.pin_memory on a ZeRO-Offload engine: the host memory its
// GPU copies go through (the working weights' flat buffer, the gradient
// staging) is page-locked for the engine's life and only then, training is
// unchanged, and the setting is not reported as ignored. A CPU engine and a
// device-resident one pin nothing.
TEST(EngineOnDeviceState, PinMemoryPinsWhatCrosses) {
    test_device::HostBackedDevice device;
    const int64_t before = ds::device_memory::pinned_bytes();
    for (const char* dtype : {"bf16", "fp32"}) {
        const Spec s{dtype, 2, 1};
        const size_t es = std::string(dtype) == "fp32" ? 4 : 2;
        std::string pinned_config = config(s);
        const std::string dev = "\"device\": \"cpu\"";
        pinned_config.replace(pinned_config.find(dev), dev.size(), dev + ", \"pin_memory\": true");
        LogCapture log;
        {
            Model mp, mc;
            EngineGuard p{create(pinned_config, kCuda0)};
            EngineGuard c{create(config(s), kCpu)};
            mp.add_to(p.e, kCpu);
            mc.add_to(c.e, kCpu);
            // One page each (blocks of whole pages): the working weights' flat
            // buffer and the staging for the largest (fp32) gradient.
            const int64_t pinned = ds::device_memory::pinned_bytes() - before;
            EXPECT_EQ(pinned, 2 * static_cast<int64_t>(::sysconf(_SC_PAGESIZE))) << dtype;
            for (int k = 0; k < 3; ++k) {
                micro_step(p.e, mp, k, kCuda0);
                micro_step(c.e, mc, k, kCpu);
                for (const char* n : kNames)
                    EXPECT_EQ(view_bytes(p.e, n, kCuda0, static_cast<uint8_t>(8 * es)),
                              view_bytes(c.e, n, kCpu, static_cast<uint8_t>(8 * es)))
                        << n << " " << dtype;
            }
            EXPECT_EQ(ds::device_memory::pinned_bytes() - before, pinned) << "staging grew: " << dtype;
        }
        EXPECT_EQ(ds::device_memory::pinned_bytes(), before) << dtype;
        EXPECT_EQ(log.text.find("pin_memory = true is ignored"), std::string::npos) << log.text;
    }
    LogCapture log;
    Model m1, m2;
    std::string cpu_config = config(Spec{"bf16", 2, 1});
    const std::string dev = "\"device\": \"cpu\"";
    cpu_config.replace(cpu_config.find(dev), dev.size(), dev + ", \"pin_memory\": true");
    EngineGuard c{create(cpu_config, kCpu)};
    m1.add_to(c.e, kCpu);
    EngineGuard r{create(config(Spec{"bf16", 2, 1, "none"}), kCuda0)};
    m2.add_to(r.e, kCpu);
    EXPECT_EQ(ds::device_memory::pinned_bytes(), before);
    EXPECT_NE(log.text.find("offload_optimizer.pin_memory = true is ignored"), std::string::npos) << log.text;
}

// ZeRO-Offload at ZeRO-3 with offload_param "cpu": the working weights are
// the offloaded parameters, so offload_param.pin_memory page-locks the host
// memory they cross to the GPU from (in a world of one the flat working
// buffer: one page here) and offload_optimizer.pin_memory only the
// gradients' (the staging: one page); each setting is honoured, not
// reported ignored, and training equals the CPU engine's either way.
TEST(EngineOnDeviceState, ParamPinMemoryUnderOffloadPinsTheWeightsSide) {
    test_device::HostBackedDevice device;
    const int64_t before = ds::device_memory::pinned_bytes(), page = ::sysconf(_SC_PAGESIZE);
    const Spec s{"bf16", 3, 1, "cpu", "cpu"};
    for (const bool param_pin : {false, true})
        for (const bool optimizer_pin : {false, true}) {
            std::string json = config(s);
            const std::pair<std::string, bool> pins[] = {{"\"offload_param\": {", param_pin},
                                                          {"\"offload_optimizer\": {", optimizer_pin}};
            for (const auto& [section, pin] : pins)
                if (pin) json.insert(json.find(section) + section.size(), "\"pin_memory\": true, ");
            const std::string what = std::string("offload_param pin ") + (param_pin ? "true" : "false") +
                                     ", offload_optimizer pin " + (optimizer_pin ? "true" : "false");
            LogCapture log;
            {
                Model md, mc;
                EngineGuard d{create(json, kCuda0)};
                EngineGuard c{create(config(s), kCpu)};
                md.add_to(d.e, kCpu);
                mc.add_to(c.e, kCpu);
                EXPECT_EQ(ds::device_memory::pinned_bytes() - before, page * (param_pin + optimizer_pin)) << what;
                for (int k = 0; k < 2; ++k) {
                    micro_step(d.e, md, k, kCuda0);
                    micro_step(c.e, mc, k, kCpu);
                }
                for (const char* n : kNames)
                    EXPECT_EQ(view_bytes(d.e, n, kCuda0, 16), view_bytes(c.e, n, kCpu, 16)) << n << ", " << what;
            }
            EXPECT_EQ(ds::device_memory::pinned_bytes(), before) << what;
            EXPECT_EQ(log.text.find("pin_memory = true is ignored"), std::string::npos) << what << ": " << log.text;
        }
}

// offload_param.pin_memory on a device-resident ZeRO-3 engine: with device
// "cpu" the host chunks are page-locked (and the setting is honoured), with
// "nvme" nothing is (pages leave memory for the swap file) and the resolved
// config reports it ignored.
TEST(EngineOnDeviceState, ParamPinMemoryLocksHostChunksButNotSwappedOnes) {
    test_device::HostBackedDevice device;
    const int64_t before = ds::device_memory::pinned_bytes();
    for (const char* param_device : {"cpu", "nvme"}) {
        const Spec s{"bf16", 3, 1, "none", param_device};
        std::string json = config(s);
        const std::string dev = std::string("\"device\": \"") + param_device + "\"";
        json.replace(json.find(dev), dev.size(), dev + ", \"pin_memory\": true");
        LogCapture log;
        Model m;
        EngineGuard e{create(json, kCuda0)};
        m.add_to(e.e, kCpu);
        const bool on_cpu = std::string(param_device) == "cpu";
        if (on_cpu)
            EXPECT_GT(ds::device_memory::pinned_bytes(), before);
        else
            EXPECT_EQ(ds::device_memory::pinned_bytes(), before);
        EXPECT_EQ(log.text.find("offload_param.pin_memory = true is ignored") == std::string::npos, on_cpu)
            << param_device << ": " << log.text;
    }
}

}  // namespace
