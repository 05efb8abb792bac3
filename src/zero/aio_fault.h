// Read-side fault injection for the aio backends (aio_file.h has the write
// side, aio_fail_nth_write): with n >= 1 the n-th read request (1-based,
// counted across the process from this call) fails with EIO; 0 turns it off.
// Tests use it to exercise the swap-in error paths (param_swapper.h,
// state_swap.h).
#pragma once

namespace ds::zero {

void aio_fail_nth_read(long n);
// True when this request is the one an armed hook names (write: the
// aio_fail_nth_write counter, read: aio_fail_nth_read's).
bool aio_inject_failure(bool write);

}  // namespace ds::zero
