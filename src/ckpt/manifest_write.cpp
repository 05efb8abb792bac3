// manifest.json writing (and the small naming helpers shared with readers).
#include <cjson/cJSON.h>

#include <memory>

#include "core/crc32c.h"
#include "ckpt/manifest.h"
#include "core/error.h"
#include "core/json/json_text.h"
#include "core/json/json_writer.h"

namespace ds::ckpt {

using json::JsonWriter;

std::string optim_file_name(int32_t rank) { return "optim_rank" + std::to_string(rank) + ".safetensors"; }

std::string fragment_key(const std::string& param, int64_t offset, const std::string& what) {
    return param + "/" + std::to_string(offset) + "/" + what;
}

const ManifestFile* Manifest::file(const std::string& name) const {
    for (const ManifestFile& f : files)
        if (f.name == name) return &f;
    return nullptr;
}

std::string compact_json(const std::string& text, const char* what) {
    const json::JsonPtr doc = json::parse_text(text, {DS_ERR_INVALID_ARGUMENT, std::string(what) + ": ", "JSON"});
    std::unique_ptr<char, void (*)(void*)> s(cJSON_PrintUnformatted(doc.get()), cJSON_free);
    DS_CHECK(s != nullptr, DS_ERR_OUT_OF_MEMORY, "%s: out of memory printing JSON", what);
    return s.get();
}

std::string manifest_to_json(const Manifest& m) {
    JsonWriter w;
    w.begin_object();
    w.value("format", kManifestFormatName);
    w.value("format_version", m.format_version);
    w.value("library_version", m.library_version);
    w.value("tag", m.tag);
    w.value("world_size", static_cast<int64_t>(m.world_size));
    w.value("zero_stage", m.zero_stage);

    w.begin_object("dtypes");
    w.value("working", m.working_dtype);
    w.value("master", m.master_dtype);
    w.value("grad_accum", m.grad_accum_dtype);
    w.end_object();

    w.begin_object("counters");
    w.value("global_steps", m.global_steps);
    w.value("global_samples", m.global_samples);
    w.value("micro_steps", m.micro_steps);
    w.value("skipped_steps", m.skipped_steps);
    w.end_object();

    if (m.optimizer) {
        const OptimizerRecord& o = *m.optimizer;
        w.begin_object("optimizer");
        w.value("type", o.type);
        w.value("step", o.step);
        w.begin_array("state_names");
        for (const std::string& s : o.state_names) w.value({}, s);
        w.end_array();
        w.value("state_dtype", o.state_dtype);
        w.value("lr", o.lr);
        w.begin_array("betas");
        w.value({}, o.beta1);
        w.value({}, o.beta2);
        w.end_array();
        w.end_object();
    } else {
        w.null("optimizer");
    }

    if (m.scheduler) {
        w.begin_object("lr_scheduler");
        w.value("type", m.scheduler->type);
        w.value("last_batch_iteration", m.scheduler->last_batch_iteration);
        w.end_object();
    } else {
        w.null("lr_scheduler");
    }

    w.begin_object("loss_scaler");
    w.value("dynamic", m.loss_scaler_dynamic);
    w.value("cur_scale", m.loss_scaler.cur_scale);
    w.value("cur_iter", m.loss_scaler.cur_iter);
    w.value("last_overflow_iter", m.loss_scaler.last_overflow_iter);
    w.value("cur_hysteresis", m.loss_scaler.cur_hysteresis);
    w.end_object();

    w.begin_array("rng_states");
    for (const std::string& s : m.rng_states) w.raw({}, s);
    w.end_array();

    w.object("params", [&] {
        for (const ManifestParam& p : m.params)
            w.object(p.name, [&] {
                w.array("shape", [&] { for (int64_t d : p.shape) w.value({}, d); });
                w.value("dtype", p.dtype);
                w.value("trainable", p.trainable);
            });
    });

    w.object("partition", [&] {
        for (const RankPartition& r : m.partitions)
            w.object(r.file, [&] {
                w.value("rank", static_cast<int64_t>(r.rank));
                w.object("fragments", [&] {
                    for (const Fragment& f : r.fragments)
                        w.object(f.param, [&] { w.value("offset", f.offset); w.value("numel", f.numel); });
                });
            });
    });

    w.object("files", [&] {
        for (const ManifestFile& f : m.files)
            w.object(f.name, [&] {
                w.value("size", static_cast<int64_t>(f.size));
                w.value("crc32c", static_cast<int64_t>(f.crc32c));
            });
    });

    w.raw("config", m.config_json);
    w.raw("client_state", m.client_state_json);
    w.end_object();
    // The manifest checksums itself: its last key holds the CRC32C of every
    // byte before that key's opening quote.
    std::string text = w.str();
    const size_t close = text.rfind('}');
    std::string sealed = text.substr(0, close);
    while (!sealed.empty() && (sealed.back() == '\n' || sealed.back() == ' ')) sealed.pop_back();
    sealed += ",\n  ";
    const uint32_t crc = crc32c(0, sealed.data(), sealed.size());
    sealed += "\"";
    sealed += kManifestSealKey;
    sealed += "\": " + std::to_string(crc) + "\n}\n";
    return sealed;
}

}  // namespace ds::ckpt
