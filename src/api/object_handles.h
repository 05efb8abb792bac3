// A registry of live handles for plain objects behind the C ABI (topologies,
// pipeline schedules): a handle is valid only while registered, so a NULL,
// destroyed or foreign pointer is reported (DS_ERR_INVALID_HANDLE) without
// being dereferenced. Lookups hand out a shared reference, so destroying a
// handle on another thread never frees an object under a running call.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/error.h"

namespace ds::api {

// H: the opaque handle struct (only its address is used); T: the object.
template <class H, class T>
class ObjectRegistry {
public:
    // `what` names the kind in messages ("topology").
    explicit ObjectRegistry(const char* what) : what_(what) {}

    H* add(std::shared_ptr<T> object) {
        auto key = std::make_unique<char>();  // a unique address; never dereferenced as H
        H* h = reinterpret_cast<H*>(key.get());
        std::lock_guard<std::mutex> lock(mu_);
        live_.emplace(h, Entry{std::move(key), std::move(object)});
        return h;
    }

    // The object behind a live handle, or DS_ERR_INVALID_HANDLE naming `arg`.
    std::shared_ptr<T> get(const H* h, const char* arg) const {
        DS_CHECK(h != nullptr, DS_ERR_INVALID_HANDLE, "argument '%s' is NULL", arg);
        std::lock_guard<std::mutex> lock(mu_);
        auto it = live_.find(h);
        DS_CHECK(it != live_.end(), DS_ERR_INVALID_HANDLE, "argument '%s' is not a live %s (destroyed or never created)",
                 arg, what_);
        return it->second.object;
    }

    // Unregisters; false (a no-op) for NULL or a handle that is not live.
    bool remove(const H* h) {
        std::shared_ptr<T> last;  // released outside the lock
        std::unique_ptr<char> key;
        std::lock_guard<std::mutex> lock(mu_);
        auto it = live_.find(h);
        if (it == live_.end()) return false;
        last = std::move(it->second.object);
        key = std::move(it->second.key);
        live_.erase(it);
        return true;
    }

private:
    struct Entry {
        std::unique_ptr<char> key;
        std::shared_ptr<T> object;
    };
    const char* what_;
    mutable std::mutex mu_;
    std::unordered_map<const H*, Entry> live_;
};

}  // namespace ds::api
