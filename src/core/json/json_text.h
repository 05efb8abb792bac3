// Parsing JSON text strictly, for every reader in the library (the config,
// checkpoint manifests, safetensors headers): RFC 8259 syntax errors with
// line and column, and duplicate keys rejected at any depth. The caller
// chooses the status and the words around every message (TextErrors), so
// each reader reports defects in its own terms without rewriting messages.
#pragma once

#include <cjson/cJSON.h>

#include <memory>
#include <string>
#include <string_view>

#include "deepspeed_c.h"

namespace ds::json {

struct CJsonDeleter {
    void operator()(cJSON* p) const { cJSON_Delete(p); }
};
using JsonPtr = std::unique_ptr<cJSON, CJsonDeleter>;

// How a parse failure is reported: ds::Error(status) with the message
//   <prefix><subject> syntax error at line L, column C: <reason>
//   <prefix><subject> could not be parsed (stopped at byte offset N)
//   <prefix><path>: duplicate key
// e.g. {DS_ERR_INVALID_CONFIG, "", "config JSON"} for the config, or
// {DS_ERR_FORMAT, "<file>: ", "JSON"} for a checkpoint file.
struct TextErrors {
    ds_status_t status;
    std::string prefix;
    const char* subject;
};

// Strict RFC 8259 syntax check (columns count characters; a leading UTF-8
// byte-order mark is skipped).
void check_syntax(std::string_view text, const TextErrors& errors);

// Parse `text` as one JSON value. Syntax errors (including empty input,
// embedded NUL bytes and trailing garbage) name the 1-based line and column;
// a key repeated in any object, at any depth, is "<path>: duplicate key".
JsonPtr parse_text(std::string_view text, const TextErrors& errors);

// "<path>: duplicate key" for the first key repeated in any object under `v`
// (`path` names `v`; empty for a document's root).
void check_duplicate_keys(const cJSON* v, const std::string& path, const TextErrors& errors);

}  // namespace ds::json
