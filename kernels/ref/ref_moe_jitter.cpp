// Scalar float64 reference for the MoE gate's jitter (nn_moe.h): each
// element's Philox block drawn on its own (dsk_philox4x32_10), the uniform
// kept exact in double, the factor 0.99 + 0.02 u in double.
#include "nn_moe.h"

extern "C" void dsk_ref_moe_jitter(const double* src, int64_t n, const dsk_dropout_key* key, uint64_t first,
                                   int accumulate, double* dst) {
    const uint32_t k[2] = {static_cast<uint32_t>(key->seed & 0xffffffffu) ^ static_cast<uint32_t>(key->stream >> 32),
                           static_cast<uint32_t>(key->seed >> 32)};
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t e = key->offset + first + static_cast<uint64_t>(i);
        const uint32_t ctr[4] = {static_cast<uint32_t>((e / 4) & 0xffffffffu), static_cast<uint32_t>((e / 4) >> 32),
                                 key->module_id, static_cast<uint32_t>(key->stream & 0xffffffffu)};
        uint32_t out[4];
        dsk_philox4x32_10(ctr, k, out);
        const double u = (static_cast<double>(out[e % 4]) + 0.5) / 4294967296.0;
        const double p = src[i] * (0.99 + 0.02 * u);
        dst[i] = accumulate ? dst[i] + p : p;
    }
}
