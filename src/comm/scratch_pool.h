// ScratchPool: host staging buffers for operations that reduce 16-bit data
// in fp32. A buffer goes back to the pool when its last user drops it, so a
// training loop reducing same-sized buckets allocates only in its first step.
#pragma once

#include <cstddef>
#include <memory>

namespace ds::comm {

class ScratchPool {
public:
    ScratchPool();
    // At least `bytes` (64-byte aligned), reused when a pooled buffer is big
    // enough; throws std::bad_alloc when memory is exhausted.
    std::shared_ptr<void> acquire(size_t bytes);

private:
    struct State;
    std::shared_ptr<State> state_;
};

}  // namespace ds::comm
