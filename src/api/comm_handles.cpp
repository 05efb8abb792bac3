#include "api/comm_handles.h"

#include <mutex>
#include <unordered_map>

namespace ds::api {

namespace {
std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
}
using Registry = std::unordered_map<const ds_comm*, std::shared_ptr<ds::comm::Communicator>>;
Registry& registry() {
    static auto* r = new Registry();  // never destroyed: safe during exit
    return *r;
}
}  // namespace

ds_comm_t* comm_handle_create(std::shared_ptr<ds::comm::Communicator> comm) {
    auto h = std::make_unique<ds_comm>();
    {
        std::lock_guard<std::mutex> lock(registry_mutex());
        registry().emplace(h.get(), std::move(comm));
    }
    return h.release();
}

bool comm_handle_destroy(ds_comm_t* h) {
    if (!h) return false;
    std::shared_ptr<ds::comm::Communicator> last;  // released outside the lock
    {
        std::lock_guard<std::mutex> lock(registry_mutex());
        auto it = registry().find(h);
        if (it == registry().end()) return false;
        last = std::move(it->second);
        registry().erase(it);
    }
    h->magic = 0;
    delete h;
    return true;
}

std::shared_ptr<ds::comm::Communicator> comm_retain(const ds_comm_t* h, const char* arg) {
    DS_CHECK(h != nullptr, DS_ERR_INVALID_HANDLE, "argument '%s' is NULL", arg);
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().find(h);
    DS_CHECK(it != registry().end() && h->magic == ds_comm::kMagic, DS_ERR_INVALID_HANDLE,
             "argument '%s' is not a live communicator (destroyed or never created)", arg);
    return it->second;
}

}  // namespace ds::api
