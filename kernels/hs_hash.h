/* A stable 64-bit hash of byte strings (ids): the same value in every process and on every
 * machine, so an id map built from it can be saved in a file and mapped back (Python's own
 * str hash is salted per process). Not cryptographic: collisions are resolved by the caller,
 * which compares the stored id. */
#ifndef HS_HASH_H
#define HS_HASH_H

#include "hs_common.h"

uint64_t hs_hash_bytes(const uint8_t *p, int64_t n);

/* out[i] = hash of data[start[i] .. start[i] + len[i]); len -1 (a missing string) hashes as
 * empty. HS_EINVAL if a span leaves [0, size). */
int hs_hash_spans(const uint8_t *data, int64_t size, const int64_t *start, const int32_t *len,
                  int64_t n, int64_t *out);

#endif
