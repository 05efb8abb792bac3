// manifest.json parsing and structural checks.
#include <algorithm>
#include <limits>
#include <set>

#include "core/crc32c.h"
#include "ckpt/json_in.h"
#include "ckpt/manifest.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/json/json_messages.h"
#include "core/json/json_text.h"

namespace ds::ckpt {

namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxWorld = 1 << 24;

std::string read_dtype(const JsonIn& v) {
    std::string s = v.as_string();
    if (st_dtype_size(s) == 0) v.fail_here("is not a safetensors dtype name");
    return s;
}

// A value the config would also have to hold: the config reader's own range
// test (json::in_range, as the optimizer section applies it) with its failure
// reported as a corrupt manifest key.
double config_ranged(const JsonIn& v, double lo, double hi, const char* range) {
    const double d = v.as_double();  // finite, as the config requires too
    if (!json::in_range(d, lo, hi)) v.fail_here(range);
    return d;
}

// Betas as the optimizer config accepts them: each in [0, 1).
double read_beta(const JsonIn& v) {
    const double b = config_ranged(v, 0.0, 1.0, "must be in [0, 1) as optimizer.params.betas");
    if (b >= 1.0) v.fail_here("must be in [0, 1) as optimizer.params.betas");
    return b;
}

OptimizerRecord read_optimizer(const JsonIn& o) {
    OptimizerRecord r;
    r.type = o.at("type").as_string();
    r.step = o.at("step").as_int(0, kI64Max);
    o.at("state_names").each_element([&](const JsonIn& n) {
        std::string s = n.as_string();
        if (s.empty() || s == "master" || s.find('/') != std::string::npos)
            n.fail_here("must be a non-empty name without '/' other than \"master\"");
        r.state_names.push_back(s);
    });
    r.state_dtype = read_dtype(o.at("state_dtype"));
    r.lr = config_ranged(o.at("lr"), 0.0, std::numeric_limits<double>::infinity(),
                         "must be a finite number >= 0 as optimizer.params.lr");
    JsonIn betas = o.at("betas");
    betas.expect_array();
    if (cJSON_GetArraySize(betas.node()) != 2) betas.fail_here("must hold two numbers");
    r.beta1 = read_beta(betas.element(betas.node()->child, 0));
    r.beta2 = read_beta(betas.element(betas.node()->child->next, 1));
    return r;
}

void read_params(const JsonIn& ps, Manifest& m) {
    ps.each_member([&](const JsonIn& p, const char* name) {
        ManifestParam mp;
        mp.name = name;
        if (mp.name.empty()) p.fail_here("has an empty parameter name");
        JsonIn shape = p.at("shape");
        shape.each_element([&](const JsonIn& d) { mp.shape.push_back(d.as_int(0, kI64Max)); });
        try {
            mp.numel = checked_numel(mp.shape, mp.name.c_str());
        } catch (const Error&) {
            shape.fail_here("has too many elements");
        }
        mp.dtype = read_dtype(p.at("dtype"));
        mp.trainable = p.at("trainable").as_bool();
        m.params.push_back(std::move(mp));
    });
}

void read_partitions(const JsonIn& part, Manifest& m) {
    std::set<int32_t> ranks;
    part.each_member([&](const JsonIn& r, const char* file) {
        RankPartition rp;
        rp.file = file;
        rp.rank = static_cast<int32_t>(r.at("rank").as_int(0, m.world_size - 1));
        if (!ranks.insert(rp.rank).second) r.at("rank").fail_here("repeats a rank");
        if (rp.file != optim_file_name(rp.rank)) r.fail_here(("must be named " + optim_file_name(rp.rank)).c_str());
        r.at("fragments").each_member([&](const JsonIn& fj, const char* param) {
            // (braced initialisation reads offset before numel)
            rp.fragments.push_back(
                Fragment{param, fj.at("offset").as_int(0, kI64Max), fj.at("numel").as_int(1, kI64Max)});
        });
        m.partitions.push_back(std::move(rp));
    });
}

void read_files(const JsonIn& files, Manifest& m) {
    files.each_member([&](const JsonIn& f, const char* name) {
        ManifestFile mf;
        mf.name = name;
        if (mf.name.empty() || mf.name.find('/') != std::string::npos || mf.name[0] == '.' ||
            mf.name == kManifestFile)
            f.fail_here("is not a plain file name inside the tag directory");
        mf.size = static_cast<uint64_t>(f.at("size").as_int(0, kI64Max));
        mf.crc32c = static_cast<uint32_t>(f.at("crc32c").as_int(0, 0xFFFFFFFFll));
        m.files.push_back(std::move(mf));
    });
}

// Each partition file is listed, every fragment names a trainable parameter
// and lies inside it, and each trainable parameter's fragments tile it.
void check_partition(const Manifest& m, const std::string& what) {
    for (const RankPartition& r : m.partitions)
        DS_CHECK(m.file(r.file) != nullptr, DS_ERR_FORMAT, "%s: partition file '%s' is not listed in 'files'",
                 what.c_str(), r.file.c_str());
    DS_CHECK(m.file(kModelFile) != nullptr, DS_ERR_FORMAT, "%s: '%s' is not listed in 'files'", what.c_str(),
             kModelFile);
    std::unordered_map<std::string, const ManifestParam*> params;
    for (const ManifestParam& p : m.params) params.emplace(p.name, &p);
    FragmentIndex index = index_fragments(m);
    for (const auto& [name, frags] : index) {
        auto it = params.find(name);
        DS_CHECK(it != params.end(), DS_ERR_FORMAT, "%s: partition '%s' has a fragment of unknown parameter '%s'",
                 what.c_str(), frags.front().part->file.c_str(), name.c_str());
        DS_CHECK(it->second->trainable, DS_ERR_FORMAT,
                 "%s: frozen parameter '%s' has optimizer fragments (in '%s')", what.c_str(), name.c_str(),
                 frags.front().part->file.c_str());
    }
    for (const ManifestParam& p : m.params) {
        if (!p.trainable || !m.optimizer) continue;
        auto it = index.find(p.name);
        DS_CHECK(it != index.end() || p.numel == 0, DS_ERR_FORMAT,
                 "%s: trainable parameter '%s' has no optimizer fragment in any partition", what.c_str(),
                 p.name.c_str());
        int64_t pos = 0;
        if (it != index.end())
            for (const FragmentRef& f : it->second) {
                DS_CHECK(f.frag->offset == pos, DS_ERR_FORMAT,
                         "%s: parameter '%s': fragment at offset %lld in '%s' %s (expected offset %lld)",
                         what.c_str(), p.name.c_str(), static_cast<long long>(f.frag->offset),
                         f.part->file.c_str(), f.frag->offset < pos ? "overlaps another" : "leaves a gap",
                         static_cast<long long>(pos));
                pos += f.frag->numel;
            }
        DS_CHECK(pos == p.numel, DS_ERR_FORMAT, "%s: parameter '%s': fragments cover %lld of %lld elements",
                 what.c_str(), p.name.c_str(), static_cast<long long>(pos), static_cast<long long>(p.numel));
    }
}

}  // namespace

FragmentIndex index_fragments(const Manifest& m) {
    FragmentIndex index;
    for (const RankPartition& r : m.partitions)
        for (const Fragment& f : r.fragments) index[f.param].push_back({&r, &f});
    for (auto& [name, v] : index)
        std::sort(v.begin(), v.end(),
                  [](const FragmentRef& a, const FragmentRef& b) { return a.frag->offset < b.frag->offset; });
    return index;
}

Manifest parse_manifest(const std::string& text, const std::string& what) {
    const std::string seal = std::string("\"") + kManifestSealKey + "\"";
    const size_t seal_pos = text.rfind(seal);
    DS_CHECK(seal_pos != std::string::npos, DS_ERR_FORMAT, "%s: key '%s' is missing (truncated or not a manifest)",
             what.c_str(), kManifestSealKey);
    const uint32_t actual = crc32c(0, text.data(), seal_pos);
    const json::JsonPtr doc = json::parse_text(text, {DS_ERR_FORMAT, what + ": ", "JSON"});
    JsonIn root(doc.get(), what, "");
    root.expect_object();
    const int64_t recorded = root.at(kManifestSealKey).as_int(0, 0xFFFFFFFFll);
    DS_CHECK(static_cast<uint32_t>(recorded) == actual, DS_ERR_FORMAT,
             "%s is corrupt: its CRC32C is 0x%08x but it records 0x%08x", what.c_str(), actual,
             static_cast<uint32_t>(recorded));
    Manifest m;
    JsonIn fmt = root.at("format");
    if (fmt.as_string() != kManifestFormatName) fmt.fail_here("is not \"deepspeed_c.checkpoint\"");
    JsonIn ver = root.at("format_version");
    m.format_version = ver.as_int(1, kI64Max);
    if (m.format_version > kManifestFormatVersion)
        ver.fail_here("is newer than this library reads (1): the checkpoint was written by a newer deepspeed_c");
    m.library_version = root.at("library_version").as_string();
    m.tag = root.at("tag").as_string();
    m.world_size = static_cast<int32_t>(root.at("world_size").as_int(1, kMaxWorld));
    m.zero_stage = root.at("zero_stage").as_int(0, 3);

    JsonIn dt = root.at("dtypes");
    m.working_dtype = read_dtype(dt.at("working"));
    m.master_dtype = read_dtype(dt.at("master"));
    if (m.master_dtype != "F32") dt.at("master").fail_here("must be \"F32\"");
    m.grad_accum_dtype = read_dtype(dt.at("grad_accum"));

    JsonIn c = root.at("counters");
    m.global_steps = c.at("global_steps").as_int(0, kI64Max);
    m.global_samples = c.at("global_samples").as_int(0, kI64Max);
    m.micro_steps = c.at("micro_steps").as_int(0, kI64Max);
    m.skipped_steps = c.at("skipped_steps").as_int(0, kI64Max);

    JsonIn opt = root.at("optimizer");
    if (!opt.is_null()) m.optimizer = read_optimizer(opt);
    JsonIn sch = root.at("lr_scheduler");
    if (!sch.is_null())
        m.scheduler = SchedulerRecord{sch.at("type").as_string(), sch.at("last_batch_iteration").as_int(-1, kI64Max)};

    JsonIn ls = root.at("loss_scaler");
    m.loss_scaler_dynamic = ls.at("dynamic").as_bool();
    m.loss_scaler.cur_scale = ls.at("cur_scale").as_double();
    m.loss_scaler.cur_iter = ls.at("cur_iter").as_int(0, kI64Max);
    m.loss_scaler.last_overflow_iter = ls.at("last_overflow_iter").as_int(-1, kI64Max);
    m.loss_scaler.cur_hysteresis = ls.at("cur_hysteresis").as_int(1, kI64Max);
    if (!(m.loss_scaler.cur_scale > 0)) ls.at("cur_scale").fail_here("must be > 0");

    root.at("rng_states").each_element([&](const JsonIn& e) { m.rng_states.push_back(e.as_compact_json()); });

    read_params(root.at("params"), m);
    read_partitions(root.at("partition"), m);
    read_files(root.at("files"), m);
    JsonIn cfg = root.at("config");
    cfg.expect_object();
    m.config_json = cfg.as_compact_json();
    m.client_state_json = root.at("client_state").as_compact_json();
    check_partition(m, what);
    return m;
}

}  // namespace ds::ckpt
