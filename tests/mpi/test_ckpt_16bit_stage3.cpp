// ds_save_16bit_model at ZeRO stage 3 across ranks (issue 8): with
// stage3_gather_16bit_weights_on_model_save every rank takes part in
// gathering each partitioned parameter and rank 0 writes them whole — the
// file's values equal the parameters' initial values (computed here
// independently); DS_SAVE_EXCLUDE_FROZEN leaves the frozen parameter out.
// Without the key every rank gets DS_ERR_INVALID_CONFIG and nothing is
// written (DeepSpeed returns False).
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/file_io.h"
#include "ckpt/safetensors.h"
#include "comm/factory.h"
#include "core/error.h"
#include "engine/engine.h"
#include "mpi_gtest_main.h"

namespace {

const std::vector<int64_t> kSizes = {5, 37, 1001};  // p0, p1 trainable; p2 frozen

float init_value(size_t i, int64_t j) { return std::sin(0.37f * static_cast<float>(j) + static_cast<float>(i)); }

std::unique_ptr<ds::Engine> make(bool gather) {
    const std::string cfg =
        std::string("{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\"},"
                    " \"zero_optimization\": {\"stage\": 3, \"param_persistence_threshold\": 0") +
        (gather ? ", \"stage3_gather_16bit_weights_on_model_save\": true" : "") + "}}";
    ds::EngineOptions o;
    o.log_level = DS_LOG_WARN;
    auto e = std::make_unique<ds::Engine>(cfg, o, nullptr);
    for (size_t i = 0; i < kSizes.size(); ++i) {
        std::vector<float> v(static_cast<size_t>(kSizes[i]));
        for (int64_t j = 0; j < kSizes[i]; ++j) v[static_cast<size_t>(j)] = init_value(i, j);
        int64_t shape = kSizes[i];
        DLTensor t{};
        t.data = v.data();
        t.device = {kDLCPU, 0};
        t.ndim = 1;
        t.dtype = {kDLFloat, 32, 1};
        t.shape = &shape;
        e->add_param(("p" + std::to_string(i)).c_str(), &t, i < 2 ? DS_PARAM_TRAINABLE : 0);
    }
    e->init();
    return e;
}

std::string shared_dir(ds::Engine& e) {
    char path[64] = "/tmp/ds_16bit_s3XXXXXX";
    if (e.rank() == 0 && !mkdtemp(path)) std::abort();
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    return path;
}

TEST(Ckpt16bitStage3, GathersEveryPartitionAndExcludesFrozen) {
    auto e = make(true);
    ASSERT_GE(e->world_size(), 2);
    const std::string dir = shared_dir(*e);
    e->save_16bit_model(dir.c_str(), "all.safetensors", 0);
    e->save_16bit_model(dir.c_str(), "trainable.safetensors", DS_SAVE_EXCLUDE_FROZEN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (e->rank() == 0) {
        for (const char* file : {"all.safetensors", "trainable.safetensors"}) {
            const bool all = std::strcmp(file, "all.safetensors") == 0;
            const std::string path = dir + "/" + file;
            std::ifstream f(path, std::ios::binary);
            const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
            const ds::ckpt::StHeader h = ds::ckpt::parse_safetensors(bytes.data(), bytes.size(), path);
            EXPECT_EQ(h.tensors.size(), all ? 3u : 2u) << file;
            for (size_t i = 0; i < kSizes.size(); ++i) {
                const ds::ckpt::StTensor* t = h.find("p" + std::to_string(i));
                if (i == 2 && !all) {
                    EXPECT_EQ(t, nullptr) << file << ": the frozen parameter was written";
                    continue;
                }
                ASSERT_NE(t, nullptr) << file << ": p" << i;
                ASSERT_EQ(t->nbytes(), static_cast<uint64_t>(kSizes[i]) * 4);
                const float* got = reinterpret_cast<const float*>(bytes.data() + h.data_start + t->begin);
                for (int64_t j = 0; j < kSizes[i]; ++j)
                    ASSERT_EQ(got[j], init_value(i, j)) << file << ": p" << i << "[" << j << "]";
            }
        }
        ds::ckpt::remove_tree(dir);
    }
}

TEST(Ckpt16bitStage3, WithoutGatherKeyNothingIsWritten) {
    auto e = make(false);
    const std::string dir = shared_dir(*e);
    try {
        e->save_16bit_model(dir.c_str(), nullptr, 0);
        ADD_FAILURE() << "saved without stage3_gather_16bit_weights_on_model_save";
    } catch (const ds::Error& err) {
        EXPECT_EQ(err.status(), DS_ERR_INVALID_CONFIG) << err.what();
        EXPECT_NE(std::string(err.what()).find("stage3_gather_16bit_weights_on_model_save"), std::string::npos);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (e->rank() == 0) {
        EXPECT_TRUE(ds::ckpt::list_dir(dir).empty()) << "something was written";
        ds::ckpt::remove_tree(dir);
    }
    // The ranks stay in step: a collective save afterwards works.
    e->save_checkpoint(dir.c_str(), "after", nullptr);
    MPI_Barrier(MPI_COMM_WORLD);
    if (e->rank() == 0) ds::ckpt::remove_tree(dir);
}

}  // namespace
