/* Ingest builders: the per-row work of a batch write done once, in C, for the whole batch:
 * grouping equal UTF-8 strings (duplicate ids, keyword dictionary codes), comparing stored
 * strings with a batch's, and the fused finite check + squared norms of a float32 block. */
#ifndef HS_INGEST_H
#define HS_INGEST_H

#include "hs_common.h"

/* Groups the spans data[start[i] .. start[i] + len[i]) by equal bytes. len -1 (a missing
 * string) belongs to no group: group[i] = -1, hash[i] as of an empty string. Otherwise
 * group[i] is the group's number, numbered by first appearance; first[g] / last[g] are the
 * first / last row of group g (arrays of n). hash[i] = hs_hash_bytes of the span.
 * Returns the number of groups, or HS_ENOMEM / HS_EINVAL (a span leaves [0, size)). */
int64_t hs_group_spans(const uint8_t *data, int64_t size, const int64_t *start, const int32_t *len,
                       int64_t n, int64_t *hash, int32_t *group, int64_t *first, int64_t *last);

/* out[i] = 1 when span i of a equals span i of b (same length, same bytes), else 0.
 * HS_EINVAL if a span leaves its buffer. */
int hs_spans_equal(const uint8_t *a, int64_t asize, const int64_t *astart, const int32_t *alen,
                   const uint8_t *b, int64_t bsize, const int64_t *bstart, const int32_t *blen,
                   int64_t n, uint8_t *out);

/* norm2[r] = sum of squares of row r of the (n, d) block, accumulated in double; returns the
 * first row holding a NaN or an infinity, or -1 when every value is finite. */
int64_t hs_rows_norm2(const float *x, int64_t n, int64_t d, double *norm2);

/* Sorts the pairs (keys[i], vals[i]) by key (signed order), stable, in place: an LSD radix
 * sort (6 passes of 11 bits), O(n) where a comparison argsort of hashes is O(n log n). */
int hs_sort_pairs(int64_t *keys, int64_t *vals, int64_t n);

#endif
