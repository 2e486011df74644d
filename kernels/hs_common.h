/* Shared definitions for the hybridsearch kernels (plain C11, no Python). */
#ifndef HS_COMMON_H
#define HS_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Return codes: kernels never abort; the Cython layer turns these into exceptions. */
#define HS_OK 0
#define HS_ENOMEM (-1)
#define HS_EINVAL (-2)

/* Metrics. Scores are always "higher is better". */
#define HS_METRIC_IP 0
#define HS_METRIC_COSINE 1
#define HS_METRIC_L2 2

#if defined(__GNUC__)
#define HS_LIKELY(x) __builtin_expect(!!(x), 1)
#define HS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define HS_LIKELY(x) (x)
#define HS_UNLIKELY(x) (x)
#endif


/* splitmix64: the seeded generator of the graph's levels (hs_hnsw.c) and of the RaBitQ rotation
 * (hs_rabitq.c), one home so both draw the same stream from a seed on every machine. */
static inline uint64_t hs_splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#endif
