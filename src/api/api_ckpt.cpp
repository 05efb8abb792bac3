// C ABI: checkpoints (save, load, 16-bit model export). Argument checks only.
#include "api/api_guard.h"
#include "api/handles.h"

using ds::api::engine_of;
using ds::api::require_arg;

extern "C" {

DS_API ds_status_t ds_save_checkpoint(ds_engine_t* engine, const char* save_dir, const char* tag,
                                      const char* client_state_json) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        require_arg(save_dir, "save_dir");
        e.save_checkpoint(save_dir, tag, client_state_json);
    });
}

DS_API ds_status_t ds_load_checkpoint(ds_engine_t* engine, const char* load_dir, const char* tag, uint32_t flags,
                                      const char** client_state_json_out) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        require_arg(load_dir, "load_dir");
        DS_CHECK(load_dir[0] != '\0', DS_ERR_INVALID_ARGUMENT, "argument 'load_dir' is empty");
        const std::string& client = e.load_checkpoint(load_dir, tag, flags);
        if (client_state_json_out) *client_state_json_out = client.c_str();
    });
}

DS_API ds_status_t ds_save_16bit_model(ds_engine_t* engine, const char* save_dir, const char* filename) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        require_arg(save_dir, "save_dir");
        e.save_16bit_model(save_dir, filename);
    });
}

DS_API ds_status_t ds_save_16bit_model_ex(ds_engine_t* engine, const char* save_dir, const char* filename,
                                          uint32_t flags) {
    return DS_GUARDED({
        ds::Engine& e = engine_of(engine);
        require_arg(save_dir, "save_dir");
        e.save_16bit_model(save_dir, filename, flags);
    });
}

}  // extern "C"
