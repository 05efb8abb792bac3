// An engine on cuda:N under mpirun, on a host-backed device
// (tests/unit/host_backed_device.h), in both GPU modes. ZeRO-Offload
// (engine/device_front.h): at ZeRO stages 1 and 2 its gradients are reduced
// across ranks in host memory and its updated weights gathered, as on the CPU
// engine. Device-resident (ResidentEngineRanks): its buffers are reduced and
// gathered in device memory. Either way, with the same gradients each rank's
// device weights and fp32 masters equal a CPU engine's at the same stage bit
// for bit after every micro-step (test_zero_stages.cpp checks the CPU
// engine's stages against stage 0).
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "../unit/host_backed_device.h"
#include "core/error.h"
#include "mpi_gtest_main.h"
#include "zero_test_util.h"

namespace {

using namespace ds_zero_test;

struct Case {
    int stage;
    const char* dtype;
    int gas;
    int64_t persistence = 100000;  // ZeRO-3 param_persistence_threshold (0: every parameter gathered on use)
    const char* offload_param = nullptr;  // ZeRO-3: zero_optimization.offload_param.device
};

class EngineOnDeviceRanks : public ::testing::TestWithParam<Case> {};

std::vector<unsigned char> view_bytes(ds::Engine& e, const std::string& name) {
    DLTensor v{};
    e.param_view(name.c_str(), &v);
    size_t n = 1;
    for (int d = 0; d < v.ndim; ++d) n *= static_cast<size_t>(v.shape[d]);
    const auto* p = static_cast<const unsigned char*>(v.data) + v.byte_offset;
    return std::vector<unsigned char>(p, p + n * v.dtype.bits / 8);
}

// `json` trained on a CPU engine and on one on the host-backed cuda:0 with the
// same gradients for 3 steps: after every micro-step each rank's device
// weights equal the CPU engine's bit for bit, and so do the fp32 copies of
// every state in `states` (nullptr: the master; else an optimizer state).
// With `gather` (ZeRO-3 below the persistence threshold) the parameters are
// gathered around their use and to be compared.
void expect_equal_to_cpu(const std::string& json, int gas, const std::vector<const char*>& states,
                         bool gather = false) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    test_device::HostBackedDevice device;
    auto cpu = make(json, nullptr);
    auto dev = make(json, nullptr, ds::Device::cuda(0));
    ASSERT_TRUE(dev->device().is_cuda());
    for (int s = 0; s < 3; ++s)
        for (int m = 0; m < gas; ++m) {
            const int64_t k = (static_cast<int64_t>(s) * gas + m) * world + rank;
            micro_step(*cpu, k, gather);
            micro_step(*dev, k, gather);
            for (size_t i = 0; i < kSizes.size(); ++i) {
                const std::string name = "p" + std::to_string(i);
                const char* names[] = {name.c_str()};
                if (gather) {
                    cpu->gather(names, 1);
                    dev->gather(names, 1);
                }
                DLTensor v{};
                dev->param_view(name.c_str(), &v);
                ASSERT_EQ(v.device.device_type, kDLCUDA);
                EXPECT_EQ(view_bytes(*dev, name), view_bytes(*cpu, name)) << name << " step " << s << " micro " << m;
                if (gather) {
                    cpu->release(names, 1);
                    dev->release(names, 1);
                }
                for (const char* state : states) {
                    const auto which = state ? ds::FullTensor::OptimizerState : ds::FullTensor::Param;
                    const std::vector<float> a = full(*cpu, which, name, state, kSizes[i]);
                    const std::vector<float> b = full(*dev, which, name, state, kSizes[i]);
                    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
                        << name << " " << (state ? state : "master") << " step " << s;
                }
            }
        }
    EXPECT_EQ(dev->counters().optimizer_steps, cpu->counters().optimizer_steps);
    EXPECT_GT(dev->counters().optimizer_steps, 0);
}

TEST_P(EngineOnDeviceRanks, EqualsTheCpuEngineAtTheSameStage) {
    const Case c = GetParam();
    std::string json = config(c.stage, c.dtype, c.gas, 1.0, c.stage >= 2, 700, c.persistence, "{\"device\": \"cpu\"}");
    ds_zero_test::TempDir swap;
    if (c.offload_param) {
        const std::string key = "\"zero_optimization\": {";
        std::string section = "\"offload_param\": {\"device\": \"" + std::string(c.offload_param) + "\"";
        if (std::string(c.offload_param) == "nvme")
            section += ", \"nvme_path\": \"" + swap.path + "\", \"buffer_size\": 4096, \"max_in_cpu\": 1100";
        json.insert(json.find(key) + key.size(), section + "}, ");
    }
    expect_equal_to_cpu(json, c.gas, {nullptr}, c.stage == 3 && c.persistence < 100000);
}

// ZeRO-Offload at stage 3: a gathered parameter's device copy is queued by
// the gather (engine/weight_pipe.h), lives until the parameter is released,
// and is freed then.
TEST(EngineOnDeviceRanksStage3, GatheredDeviceWeightsAreFreedOnRelease) {
    test_device::HostBackedDevice device;
    auto e = make(config(3, "bf16", 1, 1.0, true, 700, 0, "{\"device\": \"cpu\"}"), nullptr, ds::Device::cuda(0));
    const int64_t before = e->allocator().bytes(ds::Device::Kind::CUDA);
    const char* names[] = {"p6"};
    e->gather(names, 1);
    EXPECT_EQ(e->allocator().bytes(ds::Device::Kind::CUDA) - before, static_cast<int64_t>(kSizes[6] * 2))
        << "the gather did not start the device copy";
    DLTensor v{};
    e->param_view("p6", &v);
    ASSERT_EQ(v.device.device_type, kDLCUDA);
    EXPECT_EQ(e->allocator().bytes(ds::Device::Kind::CUDA) - before,
              static_cast<int64_t>(kSizes[6] * 2));
    e->release(names, 1);
    EXPECT_EQ(e->allocator().bytes(ds::Device::Kind::CUDA), before);
    try {
        e->param_view("p6", &v);
        ADD_FAILURE() << "a released ZeRO-3 parameter had a view";
    } catch (const ds::Error& err) {
        EXPECT_EQ(err.status(), DS_ERR_INVALID_STATE) << err.what();
    }
}

// ZeRO-Offload at stage 3: ds_engine_gather out of memory at each of its
// allocations in turn (the host gathers, the device copies, the weight
// pipe's staging) fails with nothing left gathered on either side, and the
// engine then trains as one that never failed.
TEST(EngineOnDeviceRanksStage3, GatherFailingPartWayLeavesNothingGathered) {
    test_device::HostBackedDevice device;
    const std::string json = config(3, "bf16", 1, 1.0, true, 700, 0, "{\"device\": \"cpu\"}");
    auto ref = make(json, nullptr, ds::Device::cuda(0));
    auto e = make(json, nullptr, ds::Device::cuda(0));
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const char* names[] = {"p4", "p5", "p6"};
    int failures = 0;
    for (int64_t n = 1; n < 50; ++n) {
        const int64_t dev_before = e->allocator().bytes(ds::Device::Kind::CUDA);
        const int64_t host_before = e->allocator().bytes(ds::Device::Kind::CPU);
        ds::Allocator::set_fail_after(n);
        bool threw = false;
        try {
            e->gather(names, 3);
        } catch (const ds::Error& err) {
            threw = true;
            EXPECT_TRUE(err.status() == DS_ERR_OUT_OF_MEMORY || err.status() == DS_ERR_DEVICE_OUT_OF_MEMORY)
                << err.what();
        }
        ds::Allocator::set_fail_after(-1);
        // The ranks fail at the same allocation (same sizes, same order), so they stay in step.
        if (!threw) {
            e->release(names, 3);
            break;
        }
        ++failures;
        EXPECT_EQ(e->allocator().bytes(ds::Device::Kind::CUDA), dev_before) << "allocation " << n;
        EXPECT_LE(e->allocator().bytes(ds::Device::Kind::CPU), host_before) << "allocation " << n;
        try {
            e->release(names, 1);
            ADD_FAILURE() << "p4 stayed gathered after the failed gather (allocation " << n << ")";
        } catch (const ds::Error& err) {
            EXPECT_EQ(err.status(), DS_ERR_INVALID_STATE) << err.what();
        }
    }
    EXPECT_GE(failures, 3);
    for (int s = 0; s < 3; ++s) {
        micro_step(*ref, s * world + rank, true);
        micro_step(*e, s * world + rank, true);
    }
    for (size_t i = 0; i < kSizes.size(); ++i) {
        const std::string name = "p" + std::to_string(i);
        const std::vector<float> a = full(*ref, ds::FullTensor::Param, name, nullptr, kSizes[i]);
        const std::vector<float> b = full(*e, ds::FullTensor::Param, name, nullptr, kSizes[i]);
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << name;
    }
}

// Without offload_optimizer an engine on cuda:N keeps every buffer on the
// device (zero/flat_device.cpp) and moves them between ranks over its data
// communicator (NCCL on a GPU; on the host-backed device, whose memory is
// host memory, the MPI world itself): gradients all-reduced in device
// buckets, the updated partitions all-gathered in device memory. With the
// same gradients it must equal the CPU engine at the same stage bit for bit.
struct ResidentCase {
    int stage;
    const char* dtype;
    int gas;
    bool overlap;
    int64_t allgather_bucket;  // > 0: the all-gather of the weights in shards of this many elements
    int64_t persistence = 100000;  // ZeRO-3 param_persistence_threshold (0: every parameter gathered on use)
    int64_t bucket = 700;          // reduce_bucket_size
    // ZeRO-3 offload_param.device: "cpu" (the 16-bit chunks in pinned host memory) or "nvme" (in host
    // memory swapped per page, most of them out), or none.
    const char* params_device = nullptr;
};

class ResidentEngineRanks : public ::testing::TestWithParam<ResidentCase> {};

// `swap`: offload_param "nvme"'s directory.
std::string resident_config(const ResidentCase& c, const std::string& swap = "") {
    std::string json = config(c.stage, c.dtype, c.gas, 1.0, c.overlap, c.bucket, c.persistence);
    const std::string key = "\"zero_optimization\": {";
    if (c.allgather_bucket > 0)
        json.insert(json.find(key) + key.size(), "\"allgather_bucket_size\": " + std::to_string(c.allgather_bucket) + ", ");
    if (c.params_device && std::string(c.params_device) == "cpu")
        json.insert(json.find(key) + key.size(), "\"offload_param\": {\"device\": \"cpu\", \"pin_memory\": true}, ");
    if (c.params_device && std::string(c.params_device) == "nvme")  // 1100 elements stay in memory
        json.insert(json.find(key) + key.size(), "\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"" + swap +
                                                     "\", \"buffer_size\": 4096, \"max_in_cpu\": 1100}, ");
    return json;
}

TEST_P(ResidentEngineRanks, EqualsTheCpuEngineAtTheSameStage) {
    const ResidentCase c = GetParam();
    ds_zero_test::TempDir swap;
    expect_equal_to_cpu(resident_config(c, swap.path), c.gas, {nullptr, "exp_avg_sq"},
                        c.stage == 3 && c.persistence < 100000);
}

INSTANTIATE_TEST_SUITE_P(Stages, ResidentEngineRanks,
                         ::testing::Values(ResidentCase{0, "fp32", 1, false, 0}, ResidentCase{0, "bf16", 2, false, 0},
                                           ResidentCase{1, "fp32", 1, false, 0}, ResidentCase{1, "bf16", 2, true, 0},
                                           ResidentCase{2, "fp32", 2, true, 0}, ResidentCase{2, "bf16", 1, false, 0},
                                           ResidentCase{2, "fp16", 2, true, 0}, ResidentCase{2, "bf16", 1, true, 500},
                                           ResidentCase{1, "fp32", 1, false, 300},
                                           // ZeRO-3: chunks reduce-scattered in device buckets (partial
                                           // ones compacted; 700 / ranks per segment, so 1009 and 4099
                                           // take a bucket each), gathered whole on use or persistent.
                                           ResidentCase{3, "fp32", 1, false, 0, 0},
                                           ResidentCase{3, "bf16", 2, true, 0, 0},
                                           ResidentCase{3, "fp16", 2, false, 0, 100000},
                                           ResidentCase{3, "bf16", 1, true, 0, 50, 5000},
                                           // offload_param "cpu": the 16-bit chunks in (pinned) host memory.
                                           ResidentCase{3, "bf16", 2, true, 0, 0, 700, "cpu"},
                                           ResidentCase{3, "fp32", 1, false, 0, 50, 5000, "cpu"},
                                           // offload_param "nvme": the 16-bit chunks swapped per page.
                                           ResidentCase{3, "bf16", 2, true, 0, 0, 700, "nvme"},
                                           ResidentCase{3, "fp16", 1, false, 0, 0, 5000, "nvme"},
                                           ResidentCase{3, "fp32", 1, false, 0, 50, 700, "nvme"}),
                         [](const ::testing::TestParamInfo<ResidentCase>& i) {
                             return "stage" + std::to_string(i.param.stage) + "_" + i.param.dtype + "_gas" +
                                    std::to_string(i.param.gas) + (i.param.overlap ? "_overlap" : "") +
                                    (i.param.allgather_bucket > 0 ? "_sharded" : "") +
                                    (i.param.stage == 3 ? "_persist" + std::to_string(i.param.persistence) : "") +
                                    (i.param.bucket != 700 ? "_bucket" + std::to_string(i.param.bucket) : "") +
                                    (i.param.params_device ? std::string("_params_on_") + i.param.params_device : "");
                         });

// offload_param "cpu" on a device-resident ZeRO-3 engine moves exactly the
// 16-bit chunks (this rank's ceil(n / ranks) elements of each parameter)
// from device memory to host memory.
TEST(ResidentEngineRanksStage3, ParamsOnHostHoldTheChunksInHostMemory) {
    test_device::HostBackedDevice device;
    const int world = ds_mpi_test::world_size();
    int64_t chunks = 0;
    for (int64_t n : kSizes) chunks += (n + world - 1) / world;
    std::string json = config(3, "bf16", 1, 1.0, false, 700, 0);
    auto resident = make(json, nullptr, ds::Device::cuda(0));
    const std::string key = "\"zero_optimization\": {";
    json.insert(json.find(key) + key.size(), "\"offload_param\": {\"device\": \"cpu\"}, ");
    auto apart = make(json, nullptr, ds::Device::cuda(0));
    using K = ds::Device::Kind;
    EXPECT_EQ(resident->allocator().bytes(K::CUDA) - apart->allocator().bytes(K::CUDA), chunks * 2);
    EXPECT_EQ(apart->allocator().bytes(K::CPU) - resident->allocator().bytes(K::CPU), chunks * 2);
}

// Every rank must keep its buffers in the same memory: rank 0 on the CPU and
// the others device-resident is refused on every rank, naming both.
TEST(ResidentEngineRanksMixed, DifferentMemoryOnDifferentRanksIsRefused) {
    test_device::HostBackedDevice device;
    const std::string json = config(1, "fp32", 1, 1.0, false, 700);
    ds::EngineOptions o;
    o.device_type = ds_mpi_test::world_rank() == 0 ? kDLCPU : kDLCUDA;
    try {
        ds::Engine e(json, o);
        ADD_FAILURE() << "engines with buffers in host and device memory were created on one world";
    } catch (const ds::Error& err) {
        EXPECT_EQ(err.status(), DS_ERR_INVALID_ARGUMENT) << err.what();
        EXPECT_NE(std::string(err.what()).find("host memory on rank 0"), std::string::npos) << err.what();
        EXPECT_NE(std::string(err.what()).find("GPU memory (device-resident) on rank 1"), std::string::npos)
            << err.what();
    }
    // The world is still usable: a matching pair of engines is created.
    auto a = make(json, nullptr, ds::Device::cuda(0));
    EXPECT_TRUE(a->device().is_cuda());
}

// Parameters whose chunks span many pages, and a bf16 ZeRO-3 config that
// keeps none of them in memory (offload_param "nvme" in `path`, max_in_cpu 0).
const std::vector<int64_t> kPagedSizes = {40000, 3, 20011};

std::string swapping_all(const std::string& path) {
    ResidentCase c{3, "bf16", 1, false, 0, 0};
    c.params_device = "nvme";
    std::string json = resident_config(c, path);
    const std::string small = "\"buffer_size\": 4096, \"max_in_cpu\": 1100";
    return json.replace(json.find(small), small.size(), "\"buffer_size\": 20000, \"max_in_cpu\": 0");
}

// offload_param "nvme" on a device-resident ZeRO-3 engine: this rank's
// 16-bit chunks leave device memory for host memory (as with "cpu"), and
// their pages leave that for the swap file (max_in_cpu 0): the memory report
// counts them out, the disk report in. Gathered and stepped with pages out,
// it trains as the CPU engine with its parameters on NVMe, bit for bit.
TEST(ResidentEngineRanksStage3, ParamsOnNvmeTrainWithTheirPagesSwappedOut) {
    test_device::HostBackedDevice device;
    ds_zero_test::TempDir swap_dev, swap_cpu;
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    const std::vector<int64_t>& sizes = kPagedSizes;
    int64_t chunks = 0;
    for (int64_t n : sizes) chunks += (n + world - 1) / world;
    ResidentCase c{3, "bf16", 1, false, 0, 0};
    auto resident = make(resident_config(c), nullptr, ds::Device::cuda(0), sizes);
    auto on_nvme = make(swapping_all(swap_dev.path), nullptr, ds::Device::cuda(0), sizes);
    auto cpu = make(swapping_all(swap_cpu.path), nullptr, ds::Device::cpu(), sizes);
    using K = ds::Device::Kind;
    EXPECT_EQ(resident->allocator().bytes(K::CUDA) - on_nvme->allocator().bytes(K::CUDA), chunks * 2);
    resident.reset();
    const int64_t page = ::sysconf(_SC_PAGESIZE);
    for (int s = 0; s < 4; ++s) {
        // Every whole page of the chunks is out (the partial ones at the buffer's ends stay).
        const int64_t out = on_nvme->offloaded_released_bytes(ds::MemCategory::Params);
        EXPECT_GE(out, chunks * 2 - 2 * page) << "after " << s << " steps";
        EXPECT_EQ(out % page, 0);
        int64_t params = 0, state = 0;
        on_nvme->disk_bytes(&params, &state);
        EXPECT_GE(params, out);  // the file holds the buffer's whole pages
        micro_step(*on_nvme, s * world + rank, true, sizes);
        micro_step(*cpu, s * world + rank, true, sizes);
        for (size_t i = 0; i < sizes.size(); ++i) {
            const std::string name = "p" + std::to_string(i);
            const char* names[] = {name.c_str()};
            on_nvme->gather(names, 1);
            cpu->gather(names, 1);
            EXPECT_EQ(view_bytes(*on_nvme, name), view_bytes(*cpu, name)) << name << " after step " << s;
            on_nvme->release(names, 1);
            cpu->release(names, 1);
            const std::vector<float> a = full(*cpu, ds::FullTensor::Param, name, nullptr, sizes[i]);
            const std::vector<float> b = full(*on_nvme, ds::FullTensor::Param, name, nullptr, sizes[i]);
            EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << name << " after step " << s;
        }
    }
}

// set_full on a partitioned ZeRO-3 parameter that is not gathered reaches
// its 16-bit working chunk: the next gather returns the new value (rounded
// to bf16), on the CPU and in device memory alike.
TEST(ResidentEngineRanksStage3, SetFullReachesTheWorkingChunk) {
    test_device::HostBackedDevice device;
    const std::string json = config(3, "bf16", 1, 1.0, false, 700, 0);
    for (const ds::Device where : {ds::Device::cpu(), ds::Device::cuda(0)}) {
        auto e = make(json, nullptr, where);
        const int64_t n = kSizes[6];
        std::vector<float> value(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) value[static_cast<size_t>(j)] = 0.25f + static_cast<float>(j) / 3.0f;
        int64_t shape = 0;
        const DLTensor t = host_f32(value, &shape);
        e->set_full(ds::FullTensor::Param, "p6", nullptr, &t);
        const char* names[] = {"p6"};
        e->gather(names, 1);
        DLTensor v{};
        e->param_view("p6", &v);
        for (int64_t j = 0; j < n; ++j) {
            // bf16 of the value, rounded to nearest even in integer arithmetic (not the library's conversion).
            uint32_t bits;
            std::memcpy(&bits, &value[static_cast<size_t>(j)], 4);
            bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
            float want;
            std::memcpy(&want, &bits, 4);
            ASSERT_EQ(to_f32(v, j), want) << where.str() << " element " << j;
        }
        e->release(names, 1);
    }
}

// A device-resident engine's checkpoint on several ranks resumes on CPU
// engines, and a CPU one on device-resident engines, bit for bit: ZeRO-2,
// and ZeRO-3 with every parameter gathered on use (one of them gathered
// while the checkpoint is written and read, so it is parked and restored),
// also with the parameters on NVMe (the swapped chunks read and written in
// place while parked).
TEST(ResidentEngineRanksCheckpoint, CrossesToTheCpuAndBack) {
    const int world = ds_mpi_test::world_size(), rank = ds_mpi_test::world_rank();
    test_device::HostBackedDevice device;
    auto world_comm = ds::comm::make_world(ds::comm::Options{});
    char path[64] = "/tmp/ds_resident_ckptXXXXXX";
    if (rank == 0 && !mkdtemp(path)) std::abort();
    world_comm->broadcast(path, sizeof path, ds::DType::U8, 0);
    const std::string dir = path;
    for (const int variant : {2, 3, 4}) {  // 4: stage 3, parameters on NVMe
        const int stage = variant == 2 ? 2 : 3;
        const bool paged = variant == 4;
        const std::vector<int64_t>& sizes = paged ? kPagedSizes : kSizes;
        const bool gather = stage == 3;
        const char* held[] = {paged ? "p2" : "p5"};
        for (const bool from_device : {true, false}) {
            ds_zero_test::TempDir swap_saver, swap_loader;
            const auto json = [&](const ds_zero_test::TempDir& swap) {
                return paged ? swapping_all(swap.path) : config(stage, "bf16", 1, 1.0, true, 700, 0);
            };
            auto saver = make(json(swap_saver), nullptr, from_device ? ds::Device::cuda(0) : ds::Device::cpu(), sizes);
            auto loader = make(json(swap_loader), nullptr, from_device ? ds::Device::cpu() : ds::Device::cuda(0), sizes);
            // Enough steps for the bf16 weights to move off their initial values.
            for (int s = 0; s < 6; ++s) micro_step(*saver, s * world + rank, gather, sizes);
            const std::string tag = "stage" + std::to_string(stage) + (variant == 4 ? "_nvme" : "") +
                                    (from_device ? "_from_device" : "_from_cpu");
            if (gather) {
                saver->gather(held, 1);
                loader->gather(held, 1);
            }
            saver->save_checkpoint(dir.c_str(), tag.c_str(), nullptr);
            loader->load_checkpoint(dir.c_str(), tag.c_str(), 0);
            if (gather) {  // the loaded value is in the gathered copy, on its device
                DLTensor v{};
                loader->param_view(held[0], &v);
                EXPECT_EQ(v.device.device_type, from_device ? kDLCPU : kDLCUDA);
                const std::vector<unsigned char> loaded = view_bytes(*loader, held[0]);
                EXPECT_EQ(loaded, view_bytes(*saver, held[0])) << tag;
                ds_zero_test::TempDir swap_fresh;
                auto fresh = make(json(swap_fresh), nullptr, ds::Device::cpu(), sizes);
                fresh->gather(held, 1);
                EXPECT_NE(loaded, view_bytes(*fresh, held[0])) << tag << ": the saved weights equal the initial ones";
                fresh->release(held, 1);
                saver->release(held, 1);
                loader->release(held, 1);
            }
            for (int s = 6; s < 8; ++s) {
                micro_step(*saver, s * world + rank, gather, sizes);
                micro_step(*loader, s * world + rank, gather, sizes);
            }
            for (size_t i = 0; i < sizes.size(); ++i) {
                const std::string name = "p" + std::to_string(i);
                const char* names[] = {name.c_str()};
                if (gather) {
                    saver->gather(names, 1);
                    loader->gather(names, 1);
                }
                EXPECT_EQ(view_bytes(*loader, name), view_bytes(*saver, name)) << name << " " << tag;
                if (gather) {
                    saver->release(names, 1);
                    loader->release(names, 1);
                }
                const std::vector<float> a = full(*saver, ds::FullTensor::Param, name, nullptr, sizes[i]);
                const std::vector<float> b = full(*loader, ds::FullTensor::Param, name, nullptr, sizes[i]);
                EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << name << " " << tag;
            }
        }
    }
    world_comm->barrier();
    if (rank == 0) std::system(("rm -rf '" + dir + "'").c_str());
}

INSTANTIATE_TEST_SUITE_P(Stages, EngineOnDeviceRanks,
                         ::testing::Values(Case{1, "fp32", 1}, Case{2, "bf16", 2}, Case{2, "fp16", 1},
                                           Case{1, "bf16", 2}, Case{3, "bf16", 2, 0}, Case{3, "fp32", 1, 0, "cpu"},
                                           Case{3, "fp16", 1, 100000, "cpu"}, Case{3, "bf16", 1, 0, "nvme"}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                             return "stage" + std::to_string(i.param.stage) + "_" + i.param.dtype + "_gas" +
                                    std::to_string(i.param.gas) +
                                    (i.param.stage == 3 ? "_persist" + std::to_string(i.param.persistence) : "") +
                                    (i.param.offload_param ? std::string("_param_") + i.param.offload_param : "");
                         });

}  // namespace
