// A checkpoint as a 2-rank ZeRO run lays it out (fragments of one parameter
// split across optim_rank0/1), written by hand: the fp32 consolidation and a
// single-rank engine both gather the fragments into the right elements.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "ckpt/commit.h"
#include "ckpt/consolidate.h"
#include "ckpt/file_io.h"
#include "ckpt/manifest.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "deepspeed_c.h"

namespace {

using namespace ds;
using namespace ds::ckpt;

uint16_t bf16_trunc(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(u >> 16);
}
float bf16_widen(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

struct Fixture {
    // Full tensors: w [5,3] and v [7] trainable, f [4] frozen.
    std::vector<float> w_master, v_master, w_m, w_v, v_m, v_v;
    std::vector<uint16_t> w_bf, v_bf, f_bf;
    std::string dir;

    Fixture() {
        for (int i = 0; i < 15; ++i) {
            w_master.push_back(0.1f * i + 0.013f);
            w_m.push_back(-0.5f * i);
            w_v.push_back(0.25f * i + 1);
        }
        for (int i = 0; i < 7; ++i) {
            v_master.push_back(-1.7f + 0.31f * i);
            v_m.push_back(3.0f + i);
            v_v.push_back(0.01f * i);
        }
        for (float x : w_master) w_bf.push_back(bf16_trunc(x));
        for (float x : v_master) v_bf.push_back(bf16_trunc(x));
        f_bf = {0x3F80, 0xBF00, 0x4049, 0x0001};
        char buf[] = "/tmp/ds_ckpt_mr_XXXXXX";
        dir = mkdtemp(buf);
        write();
    }
    ~Fixture() { remove_tree(dir); }

    // Rank 0 owns flat[0, 11) = w[0, 11); rank 1 owns flat[11, 22) = w[11, 15) ++ v[0, 7).
    void write() {
        TagWriter tw(dir, "step3");
        Manifest m;
        m.library_version = "0.1.0";
        m.tag = "step3";
        m.world_size = 2;
        m.zero_stage = 2;
        m.working_dtype = "BF16";
        m.grad_accum_dtype = "F32";
        m.global_steps = 3;
        m.global_samples = 24;
        m.micro_steps = 3;
        m.optimizer = OptimizerRecord{"AdamW", 3, {"exp_avg", "exp_avg_sq"}, "F32", 0.0042, 0.8, 0.95};
        m.params = {{"w", {5, 3}, 15, "BF16", true}, {"v", {7}, 7, "BF16", true}, {"f", {4}, 4, "BF16", false}};
        m.client_state_json = "{\"k\":1}";
        {
            SafetensorsWriter f(tw.file_path(kModelFile),
                                {{"w", DType::BF16, {5, 3}}, {"v", DType::BF16, {7}}, {"f", DType::BF16, {4}}}, {});
            f.write(w_bf.data(), 30);
            f.write(v_bf.data(), 14);
            f.write(f_bf.data(), 8);
            tw.add_file(kModelFile, f.finish());
        }
        struct Piece {
            const char* name;
            int64_t off, n;
            const std::vector<float>*master, *m, *v;
        };
        const std::vector<std::vector<Piece>> ranks = {
            {{"w", 0, 11, &w_master, &w_m, &w_v}},
            {{"w", 11, 4, &w_master, &w_m, &w_v}, {"v", 0, 7, &v_master, &v_m, &v_v}}};
        for (int32_t r = 0; r < 2; ++r) {
            RankPartition part{r, optim_file_name(r), {}};
            std::vector<StTensorSpec> specs;
            for (const Piece& p : ranks[r]) {
                part.fragments.push_back({p.name, p.off, p.n});
                for (const char* k : {"master", "exp_avg", "exp_avg_sq"})
                    specs.push_back({fragment_key(p.name, p.off, k), DType::F32, {p.n}});
            }
            SafetensorsWriter f(tw.file_path(part.file), specs, {});
            for (const Piece& p : ranks[r])
                for (const std::vector<float>* src : {p.master, p.m, p.v}) f.write(src->data() + p.off, p.n * 4);
            tw.add_file(part.file, f.finish());
            m.partitions.push_back(part);
        }
        m.files = tw.files();
        tw.commit(manifest_to_json(m));
    }
};

TEST(CkptMultiRank, ConsolidationGathersFragments) {
    Fixture fx;
    const std::string out = fx.dir + "/fp32.safetensors";
    size_t calls = 0;
    ConsolidateStats s = consolidate_fp32(fx.dir, "", out, [&](size_t, size_t, uint64_t, uint64_t) { ++calls; });
    EXPECT_EQ(s.tag, "step3");
    EXPECT_EQ(s.params, 3u);
    EXPECT_EQ(calls, 3u);
    EXPECT_LE(s.peak_buffer_bytes, 15u * 4);  // the largest parameter, not the model
    FileBuffer b = read_file(out);
    StHeader h = parse_safetensors(b.data(), b.size, out);
    auto data = [&](const char* n) { return reinterpret_cast<const float*>(b.data() + h.data_start + h.find(n)->begin); };
    EXPECT_EQ(h.find("w")->shape, (Shape{5, 3}));
    EXPECT_EQ(h.find("w")->dtype, "F32");
    EXPECT_EQ(h.metadata.at("format"), "pt");
    EXPECT_EQ(std::memcmp(data("w"), fx.w_master.data(), 60), 0);
    EXPECT_EQ(std::memcmp(data("v"), fx.v_master.data(), 28), 0);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(data("f")[i], bf16_widen(fx.f_bf[i])) << i;
}

TEST(CkptMultiRank, ConsolidationRejectsCorruptFragmentFile) {
    Fixture fx;
    {
        FileReader r(fx.dir + "/step3/optim_rank1.safetensors");
        std::string bytes(r.size(), '\0');
        r.read_at(0, &bytes[0], bytes.size());
        bytes[bytes.size() - 3] ^= 0x40;
        FileWriter w(fx.dir + "/step3/optim_rank1.safetensors");
        w.write(bytes.data(), bytes.size());
        w.finish();
    }
    try {
        consolidate_fp32(fx.dir, "step3", fx.dir + "/out.safetensors");
        ADD_FAILURE();
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_FORMAT);
        EXPECT_NE(std::string(e.what()).find("optim_rank1.safetensors' is corrupt"), std::string::npos) << e.what();
    }
    EXPECT_EQ(path_kind(fx.dir + "/out.safetensors"), PathKind::Missing);
}

DLTensor tensor(void* data, int64_t* shape, int32_t ndim, uint8_t code, uint8_t bits) {
    return api_test::cpu_tensor(data, shape, ndim, {code, bits, 1});
}

ds_engine_t* make_engine(bool from_fp32) {
    std::string cfg = std::string("{\"train_micro_batch_size_per_gpu\":1,\"bf16\":{\"enabled\":true},") +
                      "\"zero_optimization\":{\"load_from_fp32_weights\":" + (from_fp32 ? "true" : "false") + "}," +
                      "\"optimizer\":{\"type\":\"AdamW\",\"params\":{\"lr\":0.001}}}";
    ds_engine_t* e = nullptr;
    EXPECT_EQ(ds_engine_create(cfg.c_str(), nullptr, &e), DS_OK) << ds_last_error();
    std::vector<float> zeros(15, 0.0f);
    int64_t sw[2] = {5, 3}, sv[1] = {7}, sf[1] = {4};
    DLTensor tw = tensor(zeros.data(), sw, 2, kDLFloat, 32), tv = tensor(zeros.data(), sv, 1, kDLFloat, 32),
             tf = tensor(zeros.data(), sf, 1, kDLFloat, 32);
    EXPECT_EQ(ds_engine_add_param(e, "w", &tw, DS_PARAM_TRAINABLE), DS_OK);
    EXPECT_EQ(ds_engine_add_param(e, "v", &tv, DS_PARAM_TRAINABLE), DS_OK);
    EXPECT_EQ(ds_engine_add_param(e, "f", &tf, 0), DS_OK);
    EXPECT_EQ(ds_engine_init(e), DS_OK) << ds_last_error();
    return e;
}

std::vector<float> full(ds_engine_t* e, const char* name, const char* key, int64_t n) {
    std::vector<float> out(n);
    int64_t shape[1] = {n};
    DLTensor t = tensor(out.data(), shape, 1, kDLFloat, 32);
    // get_full checks the shape: present the flat view the parameter has.
    int64_t sw[2] = {5, 3};
    if (std::strcmp(name, "w") == 0) {
        t.ndim = 2;
        t.shape = sw;
    }
    ds_status_t s = key ? ds_engine_get_full_optimizer_state(e, name, key, &t) : ds_engine_get_full_fp32_param(e, name, &t);
    EXPECT_EQ(s, DS_OK) << ds_last_error();
    return out;
}

TEST(CkptMultiRank, SingleRankEngineLoadsTwoRankCheckpoint) {
    Fixture fx;
    ds_engine_t* e = make_engine(true);
    const char* client = nullptr;
    ASSERT_EQ(ds_load_checkpoint(e, fx.dir.c_str(), nullptr, 0, &client), DS_OK) << ds_last_error();
    EXPECT_STREQ(client, "{\"k\":1}");
    EXPECT_EQ(full(e, "w", nullptr, 15), fx.w_master);
    EXPECT_EQ(full(e, "v", nullptr, 7), fx.v_master);
    EXPECT_EQ(full(e, "w", "exp_avg", 15), fx.w_m);
    EXPECT_EQ(full(e, "w", "exp_avg_sq", 15), fx.w_v);
    EXPECT_EQ(full(e, "v", "exp_avg_sq", 7), fx.v_v);
    std::vector<float> f = full(e, "f", nullptr, 4);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(f[i], bf16_widen(fx.f_bf[i]));
    DLTensor view;
    ASSERT_EQ(ds_engine_param_view(e, "w", &view), DS_OK);
    EXPECT_EQ(std::memcmp(view.data, fx.w_bf.data(), 30), 0);
    double lr = 0;
    int64_t steps = 0, samples = 0, micro = 0;
    ds_engine_get_lr(e, &lr);
    ds_engine_global_steps(e, &steps);
    ds_engine_global_samples(e, &samples);
    ds_engine_micro_steps(e, &micro);
    EXPECT_EQ(lr, 0.0042);
    EXPECT_EQ(steps, 3);
    EXPECT_EQ(samples, 24);
    EXPECT_EQ(micro, 3);
    ds_engine_destroy(e);
}

TEST(CkptMultiRank, LoadFromFp32WeightsFalseWidensWorkingWeights) {
    Fixture fx;
    ds_engine_t* e = make_engine(false);
    ASSERT_EQ(ds_load_checkpoint(e, fx.dir.c_str(), "step3", 0, nullptr), DS_OK) << ds_last_error();
    std::vector<float> w = full(e, "w", nullptr, 15);
    for (int i = 0; i < 15; ++i) EXPECT_EQ(w[i], bf16_widen(fx.w_bf[i])) << i;
    EXPECT_NE(w, fx.w_master);
    EXPECT_EQ(full(e, "w", "exp_avg", 15), fx.w_m);  // optimizer state is still loaded
    ds_engine_destroy(e);
}

}  // namespace
