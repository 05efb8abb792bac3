#include "api/handles.h"

#include <mutex>
#include <unordered_set>

namespace ds::api {

namespace {
std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
}
std::unordered_set<const void*>& registry() {
    static auto* s = new std::unordered_set<const void*>();  // never destroyed: safe at exit
    return *s;
}
}  // namespace

void register_handle(const void* h) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().insert(h);
}

bool unregister_handle(const void* h) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    return registry().erase(h) > 0;
}

bool is_registered(const void* h) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    return registry().count(h) > 0;
}

const ds::Engine& engine_of(const ds_engine_t* e, const char* arg) {
    DS_CHECK(e != nullptr, DS_ERR_INVALID_HANDLE, "argument '%s' is NULL", arg);
    DS_CHECK(is_registered(e) && e->magic == ds_engine::kMagic && e->impl, DS_ERR_INVALID_HANDLE,
             "argument '%s' is not a live engine (destroyed or never created)", arg);
    return *e->impl;
}

ds::Engine& engine_of(ds_engine_t* e, const char* arg) {
    return const_cast<ds::Engine&>(engine_of(static_cast<const ds_engine_t*>(e), arg));
}

}  // namespace ds::api
