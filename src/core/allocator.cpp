#include "core/allocator.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "core/device_block_cache.h"
#include "core/device_memory.h"
#include "core/error.h"


namespace ds {

const char* mem_category_name(MemCategory c) {
    switch (c) {
        case MemCategory::Params: return "params";
        case MemCategory::Grads: return "grads";
        case MemCategory::OptimizerState: return "optimizer_state";
        case MemCategory::Buffers: return "buffers";
        default: break;
    }
    fail(DS_ERR_INTERNAL, "invalid MemCategory value %d", static_cast<int>(c));
}

namespace detail {

constexpr int kCategories = static_cast<int>(MemCategory::Count);
constexpr int kKinds = 2;

struct Gauge {
    std::atomic<int64_t> current{0};
    std::atomic<int64_t> peak{0};

    void add(int64_t delta) {
        int64_t now = current.fetch_add(delta, std::memory_order_relaxed) + delta;
        int64_t p = peak.load(std::memory_order_relaxed);
        while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
        }
    }
    void sub(int64_t delta) { current.fetch_sub(delta, std::memory_order_relaxed); }
    void reset_peak() { peak.store(current.load(std::memory_order_relaxed), std::memory_order_relaxed); }
};

struct AllocatorCounters {
    Gauge category[kCategories];
    Gauge kind[kKinds];
    Gauge total;
    std::atomic<int64_t> live{0};

    ~AllocatorCounters();

    void on_alloc(int64_t n, Device d, MemCategory c) {
        category[static_cast<int>(c)].add(n);
        kind[static_cast<int>(d.kind)].add(n);
        total.add(n);
        live.fetch_add(1, std::memory_order_relaxed);
    }
    void on_free(int64_t n, Device d, MemCategory c) {
        category[static_cast<int>(c)].sub(n);
        kind[static_cast<int>(d.kind)].sub(n);
        total.sub(n);
        live.fetch_sub(1, std::memory_order_relaxed);
    }
};

}  // namespace detail

namespace {

// Remaining allocations before the injected failure; 0 = disarmed.
std::atomic<int64_t> g_fail_countdown{0};

// True when this allocation is the one the test hook should fail.
bool injected_failure() {
    int64_t v = g_fail_countdown.load(std::memory_order_relaxed);
    while (v > 0) {
        if (g_fail_countdown.compare_exchange_weak(v, v - 1, std::memory_order_relaxed))
            return v == 1;
    }
    return false;
}

int category_index(MemCategory c) {
    int i = static_cast<int>(c);
    DS_CHECK(i >= 0 && i < detail::kCategories, DS_ERR_INTERNAL, "invalid MemCategory value %d", i);
    return i;
}

// Host blocks of at least this size are mapped from the OS and unmapped on
// free, so the process's resident memory follows the accounting: from
// malloc's heap, freed activations and init copies stay resident between
// live blocks (measured on the GPT benchmark: ~70 MiB of RSS above the
// allocator's high-water mark; docs/PERFORMANCE.md). Under ASan the heap is
// kept (its redzones check the big blocks too).
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kMapThreshold = SIZE_MAX;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr size_t kMapThreshold = SIZE_MAX;
#else
constexpr size_t kMapThreshold = size_t{1} << 20;
#endif
#else
constexpr size_t kMapThreshold = size_t{1} << 20;
#endif

bool host_mapped(size_t bytes) { return bytes >= kMapThreshold; }

size_t mapped_length(size_t bytes) {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
}

// Freed host mappings kept for reuse, keyed by their page-rounded length,
// one cache for the process. Training allocates the same activation sizes
// every step; unmapping them made the kernel zero ~200 MiB of fresh pages
// per GPT step (clear_page took 20 % of the samples of a 4-step bf16
// bench_gpt run, start-up included). Bound: the
// mapped bytes (live + cached) never exceed the high-water mark of live
// mapped bytes, all allocators together, so the process's resident memory
// still follows the accounting. The cache is emptied when no mapped block
// is live any more and when an Allocator goes (an engine's destroy gives its
// memory back). Never destroyed: blocks may be freed during static teardown.
struct MappedCache {
    std::mutex mu;
    std::multimap<size_t, void*> blocks;
    int64_t cached = 0;
    int64_t live = 0;
    int64_t peak = 0;

    // Takes every cached block out (the caller unmaps them outside the lock).
    std::vector<std::pair<void*, size_t>> take_all() {
        std::vector<std::pair<void*, size_t>> out;
        for (auto& b : blocks) out.emplace_back(b.second, b.first);
        blocks.clear();
        cached = 0;
        return out;
    }
};

MappedCache& mapped_cache() {
    static MappedCache* cache = new MappedCache;
    return *cache;
}

void unmap_all(const std::vector<std::pair<void*, size_t>>& blocks) noexcept {
    for (const auto& b : blocks) (void)munmap(b.first, b.second);
}

// A mapping of `bytes` for `category`: a cached one of the same page-rounded
// length, or a fresh one. Before mapping fresh memory, cached blocks are
// unmapped (largest first) until live + cached + the new block stays within
// the high-water mark (or the mark this allocation sets): a cache of sizes no
// longer asked for never holds memory beyond what was once used live.
void* map_host(size_t bytes, MemCategory category) {
    const size_t len = mapped_length(bytes);
    const int64_t n = static_cast<int64_t>(len);
    MappedCache& cache = mapped_cache();
    std::vector<std::pair<void*, size_t>> evicted;
    {
        std::lock_guard<std::mutex> lock(cache.mu);
        auto hit = cache.blocks.find(len);
        if (hit != cache.blocks.end()) {
            void* m = hit->second;
            cache.blocks.erase(hit);
            cache.cached -= n;
            cache.live += n;
            return m;
        }
        const int64_t room = std::max<int64_t>(cache.peak - cache.live - n, 0);
        while (cache.cached > room && !cache.blocks.empty()) {
            auto largest = std::prev(cache.blocks.end());
            evicted.emplace_back(largest->second, largest->first);
            cache.cached -= static_cast<int64_t>(largest->first);
            cache.blocks.erase(largest);
        }
        // Counted before mmap so that concurrent callers see the room taken;
        // given back below if the mapping fails.
        cache.live += n;
        cache.peak = std::max(cache.peak, cache.live);
    }
    unmap_all(evicted);
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        const int err = errno;
        {
            std::lock_guard<std::mutex> lock(cache.mu);
            cache.live -= n;
        }
        fail(DS_ERR_OUT_OF_MEMORY, "out of host memory allocating %zu bytes for %s (mmap failed, errno %d)",
             bytes, mem_category_name(category), err);
    }
#ifdef MADV_HUGEPAGE
    // Fewer page faults the first time a large block is touched.
    if (len >= (size_t{2} << 20)) (void)madvise(m, len, MADV_HUGEPAGE);
#endif
    return m;  // page aligned: at least kHostAlignment
}

// Keeps a freed mapping for reuse; the last live one empties the cache.
void unmap_host(void* ptr, size_t bytes) noexcept {
    const size_t len = mapped_length(bytes);
    MappedCache& cache = mapped_cache();
    std::vector<std::pair<void*, size_t>> released;
    bool kept = false;
    {
        std::lock_guard<std::mutex> lock(cache.mu);
        cache.live -= static_cast<int64_t>(len);
        if (cache.live > 0) {
            try {
                cache.blocks.emplace(len, ptr);
                cache.cached += static_cast<int64_t>(len);
                kept = true;
            } catch (...) {
                // No memory for the map node: the block goes back to the OS.
            }
        } else {
            released = cache.take_all();
            cache.peak = 0;
        }
    }
    if (!kept) (void)munmap(ptr, len);
    unmap_all(released);
}

void* host_alloc(size_t bytes, MemCategory category) {
    if (injected_failure())
        fail(DS_ERR_OUT_OF_MEMORY, "out of host memory allocating %zu bytes for %s (injected failure)",
             bytes, mem_category_name(category));
    if (host_mapped(bytes)) return map_host(bytes, category);
    void* p = nullptr;
    int rc = posix_memalign(&p, kHostAlignment, bytes);
    if (rc != 0 || p == nullptr)
        fail(DS_ERR_OUT_OF_MEMORY, "out of host memory allocating %zu bytes for %s", bytes,
             mem_category_name(category));
    return p;
}

void* runtime_alloc(void*, size_t bytes, int32_t index, const char* what) {
    return device_memory::alloc(bytes, index, what);
}
void runtime_free(void*, void* ptr, int32_t) noexcept { device_memory::free(ptr); }

// Freed CUDA blocks for reuse (device_block_cache.h), one cache for the
// process over the CUDA runtime (device_memory.h). Never destroyed: blocks
// may be freed during static teardown. Its blocks are reused in the order of
// the engine's one stream per device (the header's "Stream safety").
DeviceBlockCache& runtime_device_cache() {
    static DeviceBlockCache* cache = new DeviceBlockCache(DeviceMemoryOps{nullptr, runtime_alloc, runtime_free});
    return *cache;
}

// set_device_cache_for_testing's cache, or nullptr.
std::atomic<DeviceBlockCache*> g_test_device_cache{nullptr};

DeviceBlockCache& device_cache() {
    DeviceBlockCache* c = g_test_device_cache.load(std::memory_order_acquire);
    return c != nullptr ? *c : runtime_device_cache();
}

bool device_memory_available() {
    return g_test_device_cache.load(std::memory_order_acquire) != nullptr || device_memory::available();
}

// A block on cuda:`index` from the device cache, after the test hook's injected failure.
void* cuda_alloc(size_t bytes, int32_t index, MemCategory category) {
    if (injected_failure())
        fail(DS_ERR_DEVICE_OUT_OF_MEMORY,
             "out of memory on cuda:%d allocating %zu bytes for %s (injected failure)", index, bytes,
             mem_category_name(category));
    return device_cache().allocate(bytes, index, mem_category_name(category));
}

void raw_free(void* ptr, size_t bytes, Device device) noexcept {
    if (device.is_cpu()) {
        if (host_mapped(bytes)) unmap_host(ptr, bytes);
        else std::free(ptr);
        return;
    }
    device_cache().deallocate(ptr);
}

}  // namespace

// The last reference to an allocator's counters (the Allocator and all its
// blocks gone): its memory goes back to the OS, not only to the cache.
detail::AllocatorCounters::~AllocatorCounters() { Allocator::release_cached(); }

Allocator::Allocator() : counters_(std::make_shared<detail::AllocatorCounters>()) {}

Allocator::~Allocator() = default;

void* Allocator::allocate(size_t bytes, Device device, MemCategory category) {
    category_index(category);
    if (bytes == 0) return nullptr;
    DS_CHECK(bytes <= static_cast<size_t>(INT64_MAX), DS_ERR_OUT_OF_MEMORY,
             "cannot allocate %zu bytes for %s: larger than the address space", bytes,
             mem_category_name(category));
    void* p = nullptr;
    if (device.is_cpu()) {
        p = host_alloc(bytes, category);
    } else {
        DS_CHECK(device_memory_available(), DS_ERR_UNSUPPORTED,
                 "allocating %zu bytes for %s on %s: this build has no CUDA (rebuild with DS_WITH_CUDA=ON)",
                 bytes, mem_category_name(category), device.str().c_str());
        p = cuda_alloc(bytes, device.index, category);
    }
    counters_->on_alloc(static_cast<int64_t>(bytes), device, category);
    return p;
}

void Allocator::deallocate(void* ptr, size_t bytes, Device device, MemCategory category) noexcept {
    if (ptr == nullptr || bytes == 0) return;
    raw_free(ptr, bytes, device);
    counters_->on_free(static_cast<int64_t>(bytes), device, category);
}

std::shared_ptr<void> Allocator::allocate_block(size_t bytes, Device device, MemCategory category) {
    void* p = allocate(bytes, device, category);
    if (p == nullptr) return {};
    // The deleter holds the counters, not the Allocator, so a block may
    // outlive the Allocator that made it. If building the control block
    // throws, shared_ptr calls the deleter, so nothing leaks.
    std::shared_ptr<detail::AllocatorCounters> counters = counters_;
    return std::shared_ptr<void>(p, [counters, bytes, device, category](void* q) {
        raw_free(q, bytes, device);
        counters->on_free(static_cast<int64_t>(bytes), device, category);
    });
}

std::shared_ptr<void> Allocator::allocate_pinned_block(size_t bytes, MemCategory category) {
    category_index(category);
    if (bytes == 0) return {};
    if (injected_failure())
        fail(DS_ERR_OUT_OF_MEMORY, "out of host memory allocating %zu pinned bytes for %s (injected failure)", bytes,
             mem_category_name(category));
    const size_t len = mapped_length(bytes);
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        fail(DS_ERR_OUT_OF_MEMORY, "out of host memory allocating %zu pinned bytes for %s (mmap failed, errno %d)",
             bytes, mem_category_name(category), errno);
    try {
        device_memory::pin(m, len, mem_category_name(category));
    } catch (...) {
        (void)munmap(m, len);
        throw;
    }
    counters_->on_alloc(static_cast<int64_t>(bytes), Device::cpu(), category);
    std::shared_ptr<detail::AllocatorCounters> counters = counters_;
    return std::shared_ptr<void>(m, [counters, bytes, len, category](void* q) {
        device_memory::unpin(q, len);
        (void)munmap(q, len);
        counters->on_free(static_cast<int64_t>(bytes), Device::cpu(), category);
    });
}

int64_t Allocator::bytes(MemCategory c) const {
    return counters_->category[category_index(c)].current.load(std::memory_order_relaxed);
}
int64_t Allocator::peak(MemCategory c) const {
    return counters_->category[category_index(c)].peak.load(std::memory_order_relaxed);
}
int64_t Allocator::total() const { return counters_->total.current.load(std::memory_order_relaxed); }
int64_t Allocator::peak_total() const { return counters_->total.peak.load(std::memory_order_relaxed); }
int64_t Allocator::bytes(Device::Kind k) const {
    return counters_->kind[static_cast<int>(k)].current.load(std::memory_order_relaxed);
}
int64_t Allocator::peak(Device::Kind k) const {
    return counters_->kind[static_cast<int>(k)].peak.load(std::memory_order_relaxed);
}
int64_t Allocator::cached_host_bytes() {
    MappedCache& cache = mapped_cache();
    std::lock_guard<std::mutex> lock(cache.mu);
    return cache.cached;
}

int64_t Allocator::cached_device_bytes() {
    return device_memory_available() ? device_cache().cached_bytes() : 0;
}

int64_t Allocator::cached_device_bytes(int32_t index) {
    return device_memory_available() ? device_cache().cached_bytes(index) : 0;
}

void Allocator::release_cached() noexcept {
    MappedCache& cache = mapped_cache();
    std::vector<std::pair<void*, size_t>> blocks;
    {
        std::lock_guard<std::mutex> lock(cache.mu);
        blocks = cache.take_all();
    }
    unmap_all(blocks);
    if (DeviceBlockCache* test = g_test_device_cache.load(std::memory_order_acquire)) test->release_all();
    if (device_memory::available()) runtime_device_cache().release_all();  // cudaFree waits for the device
    device_memory::runtime::release_kernel_scratch();  // the CUDA kernels' pool (nothing made, nothing to do)
}

int64_t Allocator::live_allocations() const { return counters_->live.load(std::memory_order_relaxed); }

void Allocator::reset_peaks() {
    for (auto& g : counters_->category) g.reset_peak();
    for (auto& g : counters_->kind) g.reset_peak();
    counters_->total.reset_peak();
}

Allocator& Allocator::process() {
    static Allocator instance;
    return instance;
}

void Allocator::set_fail_after(int64_t n) {
    g_fail_countdown.store(n > 0 ? n : 0, std::memory_order_relaxed);
}

void Allocator::set_device_cache_for_testing(DeviceBlockCache* cache) {
    g_test_device_cache.store(cache, std::memory_order_release);
}

}  // namespace ds
