// Reading a committed checkpoint tag into whole tensors by name, with the
// library's verifying reader (manifest, sizes, CRC32C, headers), and
// comparing two of them: the MPI checkpoint tests check that a checkpoint
// moved to another layout and saved again is the same, bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ckpt/reader.h"
#include "ckpt/safetensors.h"

namespace ds_mpi_test {

struct CkptTensors {
    ds::ckpt::Manifest m;
    std::vector<std::string> order;  // the manifest's parameter order
    std::map<std::string, std::vector<uint8_t>> working;
    // master (fp32) then each optimizer state, whole, gathered from every fragment
    std::map<std::string, std::vector<std::vector<uint8_t>>> optim;
};

inline CkptTensors read_ckpt(const std::string& dir, const std::string& tag) {
    const std::string td = dir + "/" + tag;
    CkptTensors c;
    c.m = ds::ckpt::read_manifest(td);
    const ds::ckpt::LoadedFile model = ds::ckpt::load_verified(td, c.m, ds::ckpt::kModelFile);
    for (const ds::ckpt::ManifestParam& p : c.m.params) {
        const uint8_t* b = model.tensor(p.name, p.dtype, p.shape);
        c.working[p.name].assign(b, b + p.numel * static_cast<int64_t>(ds::ckpt::st_dtype_size(p.dtype)));
        c.order.push_back(p.name);
    }
    if (!c.m.optimizer) return c;
    const std::vector<std::string>& names = c.m.optimizer->state_names;
    const size_t ses = ds::ckpt::st_dtype_size(c.m.optimizer->state_dtype);
    std::map<std::string, int64_t> numel;
    for (const ds::ckpt::ManifestParam& p : c.m.params) numel[p.name] = p.numel;
    for (const ds::ckpt::RankPartition& r : c.m.partitions) {
        const ds::ckpt::LoadedFile f = ds::ckpt::load_verified(td, c.m, r.file);
        for (const ds::ckpt::Fragment& g : r.fragments) {
            std::vector<std::vector<uint8_t>>& v = c.optim[g.param];
            if (v.empty()) {
                v.emplace_back(static_cast<size_t>(numel.at(g.param)) * 4);
                for (size_t i = 0; i < names.size(); ++i) v.emplace_back(static_cast<size_t>(numel.at(g.param)) * ses);
            }
            const uint8_t* m = f.tensor(ds::ckpt::fragment_key(g.param, g.offset, "master"), "F32", {g.numel});
            std::memcpy(v[0].data() + g.offset * 4, m, static_cast<size_t>(g.numel) * 4);
            for (size_t i = 0; i < names.size(); ++i) {
                const uint8_t* s = f.tensor(ds::ckpt::fragment_key(g.param, g.offset, names[i]),
                                            c.m.optimizer->state_dtype, {g.numel});
                std::memcpy(v[1 + i].data() + g.offset * static_cast<int64_t>(ses), s, static_cast<size_t>(g.numel) * ses);
            }
        }
    }
    return c;
}

// Every tensor (working, master, every state) bitwise, the parameter order,
// and the training state: counters, optimizer record, schedule, loss
// scaler, random streams, client state. micro_steps: b's expected value
// (-1: a's; a loader with another gradient_accumulation_steps starts its
// next window whole).
inline void expect_same_checkpoint(const CkptTensors& a, const CkptTensors& b, const std::string& what,
                                   int64_t micro_steps = -1) {
    SCOPED_TRACE(what);
    EXPECT_EQ(a.order, b.order);
    EXPECT_EQ(a.m.working_dtype, b.m.working_dtype);
    size_t differ = 0;
    for (const auto& [name, bytes] : a.working) {
        auto it = b.working.find(name);
        if (it == b.working.end() || it->second != bytes) ++differ;
        if (differ == 1 && (it == b.working.end() || it->second != bytes)) ADD_FAILURE() << "working weights of " << name;
    }
    EXPECT_EQ(a.working.size(), b.working.size());
    EXPECT_EQ(a.optim.size(), b.optim.size());
    for (const auto& [name, tensors] : a.optim) {
        auto it = b.optim.find(name);
        if (it == b.optim.end()) {
            ADD_FAILURE() << "no optimizer state for " << name;
            continue;
        }
        for (size_t t = 0; t < tensors.size(); ++t)
            if (tensors[t] != it->second.at(t)) {
                ++differ;
                if (differ < 4) ADD_FAILURE() << "optimizer tensor " << t << " (0 = master) of " << name;
            }
    }
    EXPECT_EQ(differ, 0u);
    EXPECT_EQ(a.m.global_steps, b.m.global_steps);
    EXPECT_EQ(a.m.global_samples, b.m.global_samples);
    EXPECT_EQ(micro_steps < 0 ? a.m.micro_steps : micro_steps, b.m.micro_steps);
    EXPECT_EQ(a.m.skipped_steps, b.m.skipped_steps);
    ASSERT_EQ(a.m.optimizer.has_value(), b.m.optimizer.has_value());
    if (a.m.optimizer) {
        EXPECT_EQ(a.m.optimizer->type, b.m.optimizer->type);
        EXPECT_EQ(a.m.optimizer->step, b.m.optimizer->step);
        EXPECT_EQ(a.m.optimizer->state_names, b.m.optimizer->state_names);
        EXPECT_EQ(a.m.optimizer->lr, b.m.optimizer->lr);
        EXPECT_EQ(a.m.optimizer->beta1, b.m.optimizer->beta1);
        EXPECT_EQ(a.m.optimizer->beta2, b.m.optimizer->beta2);
    }
    ASSERT_EQ(a.m.scheduler.has_value(), b.m.scheduler.has_value());
    if (a.m.scheduler) EXPECT_EQ(a.m.scheduler->last_batch_iteration, b.m.scheduler->last_batch_iteration);
    EXPECT_EQ(a.m.loss_scaler.cur_scale, b.m.loss_scaler.cur_scale);
    EXPECT_EQ(a.m.loss_scaler.cur_iter, b.m.loss_scaler.cur_iter);
    EXPECT_EQ(a.m.loss_scaler.last_overflow_iter, b.m.loss_scaler.last_overflow_iter);
    EXPECT_EQ(a.m.loss_scaler.cur_hysteresis, b.m.loss_scaler.cur_hysteresis);
    EXPECT_EQ(a.m.rng_states, b.m.rng_states);
    EXPECT_EQ(a.m.client_state_json, b.m.client_state_json);
}

// Runs `f` (reading files on one rank): an exception is a test failure,
// never an early exit that would leave the other ranks waiting.
template <class F>
void guarded(F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
    }
}

inline float f32_at(const std::vector<uint8_t>& bytes, const std::string& dtype, size_t i) {
    if (dtype == "F32") {
        float f;
        std::memcpy(&f, bytes.data() + 4 * i, 4);
        return f;
    }
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    const uint32_t u = static_cast<uint32_t>(h) << 16;  // BF16
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// The largest |a - b| / max(1, |b|) over the working weights (and, when
// both hold them, the fp32 masters) of the parameters both checkpoints hold.
inline double max_rel_difference(const CkptTensors& a, const CkptTensors& b) {
    double worst = 0.0;
    auto rel = [](double x, double y) { return std::fabs(x - y) / std::max(1.0, std::fabs(y)); };
    for (const auto& [name, bytes] : a.working) {
        auto it = b.working.find(name);
        if (it == b.working.end() || it->second.size() != bytes.size()) return INFINITY;
        const size_t es = ds::ckpt::st_dtype_size(a.m.working_dtype), n = bytes.size() / es;
        for (size_t i = 0; i < n; ++i)
            worst = std::max(worst, rel(f32_at(bytes, a.m.working_dtype, i), f32_at(it->second, b.m.working_dtype, i)));
        auto ma = a.optim.find(name), mb = b.optim.find(name);
        if (ma != a.optim.end() && mb != b.optim.end())
            for (size_t i = 0; i < n; ++i)
                worst = std::max(worst, rel(f32_at(ma->second[0], "F32", i), f32_at(mb->second[0], "F32", i)));
    }
    return worst;
}

}  // namespace ds_mpi_test
