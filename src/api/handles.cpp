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
thread_local CallScope* t_scope = nullptr;

void unref(ds_engine_t* h) noexcept {
    if (h->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        h->magic = 0;
        delete h;  // destructors do not throw
    }
}
}  // namespace

struct HandleAccess {
    static ds::Engine& acquire(ds_engine_t* h, const char* arg, bool exclusive) {
        CallScope* scope = t_scope;
        DS_CHECK(scope != nullptr, DS_ERR_INTERNAL, "engine_of outside a ds_* call");
        DS_CHECK(h != nullptr, DS_ERR_INVALID_HANDLE, "argument '%s' is NULL", arg);
        if (scope->held_ == h) {  // the same call asking again
            DS_CHECK(scope->exclusive_ || !exclusive, DS_ERR_INTERNAL, "engine_of: shared use upgraded");
            return *h->impl;
        }
        DS_CHECK(scope->held_ == nullptr, DS_ERR_INTERNAL, "engine_of: two engines in one call");
        {
            std::lock_guard<std::mutex> lock(registry_mutex());
            DS_CHECK(registry().count(h) > 0 && h->magic == ds_engine::kMagic && h->impl,
                     DS_ERR_INVALID_HANDLE,
                     "argument '%s' is not a live engine (destroyed or never created)", arg);
            h->refs.fetch_add(1, std::memory_order_relaxed);  // under the lock: destroy cannot free it
        }
        bool ok;
        int32_t cur = h->use.load(std::memory_order_acquire);
        if (exclusive) {
            int32_t idle = 0;
            ok = h->use.compare_exchange_strong(idle, -1, std::memory_order_acq_rel);
            cur = idle;
        } else {
            ok = false;
            while (cur >= 0 && !(ok = h->use.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel))) {
            }
        }
        if (!ok) {
            const char* other = h->inside.load(std::memory_order_relaxed);
            unref(h);
            fail(DS_ERR_INVALID_STATE,
                 "concurrent call on engine (another thread is inside %s); an engine is used by one "
                 "thread at a time (const getters may run together)",
                 other && *other ? other : "a ds_* call");
        }
        h->inside.store(scope->function(), std::memory_order_relaxed);
        scope->held_ = h;
        scope->exclusive_ = exclusive;
        // An engine on a GPU with a stream: its work this call after the stream's (Engine::call_begins).
        if (exclusive) h->impl->call_begins();
        return *h->impl;
    }
};

CallScope::CallScope(const char* function) noexcept : function_(function), prev_(t_scope) { t_scope = this; }

void CallScope::leave() {
    if (!held_ || !exclusive_ || left_) return;
    left_ = true;
    held_->impl->call_ends();
}

CallScope::~CallScope() {
    t_scope = prev_;
    if (!held_) return;
    if (exclusive_ && !left_) {  // a call that failed: its partial work still comes before the caller's next
        try {
            held_->impl->call_ends();
        } catch (...) {
        }
    }
    if (exclusive_)
        held_->use.store(0, std::memory_order_release);
    else
        held_->use.fetch_sub(1, std::memory_order_acq_rel);
    unref(held_);
}

void register_handle(ds_engine_t* h) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().insert(h);
}

bool destroy_handle(ds_engine_t* h) {
    {
        std::lock_guard<std::mutex> lock(registry_mutex());
        if (registry().erase(h) == 0) return false;
    }
    unref(h);  // the registry's reference; a call inside keeps it alive until it leaves
    return true;
}

const ds::Engine& engine_of(const ds_engine_t* e, const char* arg) {
    return HandleAccess::acquire(const_cast<ds_engine_t*>(e), arg, false);
}

ds::Engine& engine_of(ds_engine_t* e, const char* arg) { return HandleAccess::acquire(e, arg, true); }

}  // namespace ds::api
