#include "attention_check.h"

#include <cstdint>

#include "arg_check.h"

namespace ds::kernels::attention {

int check_args(const char* kn, const dsk_attention_args* a) {
    if (a == nullptr) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: args is NULL", kn);
    if (a->batch < 1 || a->seq < 1 || a->channels < 1 || a->heads < 1)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                              "%s: batch=%lld, seq=%lld, channels=%lld, heads=%lld must all be >= 1", kn,
                              static_cast<long long>(a->batch), static_cast<long long>(a->seq),
                              static_cast<long long>(a->channels), static_cast<long long>(a->heads));
    if (a->channels % a->heads != 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: channels=%lld is not a multiple of heads=%lld", kn,
                              static_cast<long long>(a->channels), static_cast<long long>(a->heads));
    if (!(a->dropout_p >= 0.0f && a->dropout_p < 1.0f))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dropout_p=%g is outside [0, 1)", kn,
                              static_cast<double>(a->dropout_p));
    if (a->causal != 0 && a->causal != 1)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: causal=%d is not 0 or 1", kn, a->causal);
    if (a->bf16_products != 0 && a->bf16_products != 1)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: bf16_products=%d is not 0 or 1", kn, a->bf16_products);
    // B*T*3C and B*H*T*T must fit (and be addressable): each product checked
    // stepwise against INT64_MAX / 4 by division (every factor is >= 1).
    const int64_t lim = INT64_MAX / 4;
    auto fits = [lim](int64_t x, int64_t y) { return x <= lim / y; };  // x * y <= lim
    const int64_t B = a->batch, T = a->seq, C = a->channels, H = a->heads;
    const bool ok = fits(B, T) && fits(B * T, 3) && fits(B * T * 3, C) && fits(B, H) && fits(B * H, T) &&
                    fits(B * H * T, T);
    if (!ok)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                              "%s: batch=%lld x seq=%lld x channels=%lld (heads=%lld) is too large", kn,
                              static_cast<long long>(B), static_cast<long long>(T), static_cast<long long>(C),
                              static_cast<long long>(H));
    return DSK_OK;
}

}  // namespace ds::kernels::attention
