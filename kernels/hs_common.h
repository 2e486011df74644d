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

#endif
