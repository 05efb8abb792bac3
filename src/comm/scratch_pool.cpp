#include "comm/scratch_pool.h"

#include <algorithm>
#include <mutex>
#include <new>
#include <vector>

namespace ds::comm {

namespace {
constexpr std::align_val_t kAlign{64};
constexpr size_t kMaxPooled = 4;  // buffers kept for reuse

struct Block {
    void* p = nullptr;
    size_t bytes = 0;
};
}  // namespace

struct ScratchPool::State {
    std::mutex mu;
    std::vector<Block> free;
    ~State() {
        for (Block& b : free) ::operator delete(b.p, kAlign);
    }
};

ScratchPool::ScratchPool() : state_(std::make_shared<State>()) {}

std::shared_ptr<void> ScratchPool::acquire(size_t bytes) {
    bytes = std::max<size_t>(bytes, 64);
    Block blk;
    {
        std::lock_guard<std::mutex> lock(state_->mu);
        // The smallest pooled buffer that fits.
        auto best = state_->free.end();
        for (auto it = state_->free.begin(); it != state_->free.end(); ++it)
            if (it->bytes >= bytes && (best == state_->free.end() || it->bytes < best->bytes)) best = it;
        if (best != state_->free.end()) {
            blk = *best;
            state_->free.erase(best);
        }
    }
    if (!blk.p) blk = Block{::operator new(bytes, kAlign), bytes};
    std::shared_ptr<State> state = state_;
    const size_t size = blk.bytes;
    return std::shared_ptr<void>(blk.p, [state, size](void* p) {
        void* drop = p;
        {
            std::lock_guard<std::mutex> lock(state->mu);
            if (state->free.size() < kMaxPooled) {
                state->free.push_back(Block{p, size});
                drop = nullptr;
            } else {  // full: keep the larger buffers
                auto smallest = std::min_element(
                    state->free.begin(), state->free.end(),
                    [](const Block& a, const Block& b) { return a.bytes < b.bytes; });
                if (smallest->bytes < size) {
                    drop = smallest->p;
                    *smallest = Block{p, size};
                }
            }
        }
        if (drop) ::operator delete(drop, kAlign);
    });
}

}  // namespace ds::comm
