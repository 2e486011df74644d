/* Distance kernels over float32 vectors with SIMD picked at run time.
 *
 * No -march=native: every x86 ISA-specific function carries its own target
 * attribute and hs_distance_init() (run once, automatically) selects the best
 * one the CPU supports. On AArch64, NEON is part of the base ISA and always
 * used (scalar stays forceable); other CPUs run the scalar code.
 */
#ifndef HS_DISTANCE_H
#define HS_DISTANCE_H

#include "hs_common.h"

#define HS_SIMD_SCALAR 0
#define HS_SIMD_AVX2 1
#define HS_SIMD_AVX512 2
#define HS_SIMD_NEON 3 /* AArch64 only; not "above" AVX-512, just another family */

/* Dispatch level in use (HS_SIMD_*). */
int hs_simd_level(void);
/* 1 if this CPU can run the given level (scalar always). */
int hs_simd_available(int level);
/* Force a level (for tests of the fallbacks); one the CPU lacks falls back to
 * the best it has. Returns the level set. */
int hs_simd_force(int level);

float hs_dot(const float *a, const float *b, int64_t d);
float hs_l2sq(const float *a, const float *b, int64_t d);
/* The dispatched implementations, for hot loops that call them millions of times. */
typedef float (*hs_pair_fn)(const float *, const float *, int64_t);
typedef float (*hs_i8_fn)(const float *, const int8_t *, int64_t);
hs_pair_fn hs_dot_impl(void);
hs_pair_fn hs_l2sq_impl(void);
hs_i8_fn hs_dot_i8_impl(void);
/* dot(q, c) of a float32 query and an int8 code vector (quantized storage). */
float hs_dot_i8(const float *q, const int8_t *c, int64_t d);

/* out[i] = dot(q, row_i) or l2sq(q, row_i) for n rows of X (row stride d).
 * Rows are row0 + i when `rows` is NULL, else rows[i]. */
void hs_dot_rows(const float *X, int64_t d, const int64_t *rows, int64_t n,
                 int64_t row0, const float *q, float *out);
void hs_l2sq_rows(const float *X, int64_t d, const int64_t *rows, int64_t n,
                  int64_t row0, const float *q, float *out);

/* out[i] = dot(q, code_i) for n int8 code rows of C (row stride d), rows as above:
 * the scan of a quantized block (a quarter of the float32 bytes). */
void hs_dot_i8_rows(const int8_t *C, int64_t d, const int64_t *rows, int64_t n,
                    int64_t row0, const float *q, float *out);

/* Register-blocked scoring of 8 queries against 32 packed rows.
 * XT is d x ldx (column t of XT is one row), QP is 8 x d (padded with zeros).
 * out is 8 x 32 row-major: out[i*32+t] = dot(QP[i], XT[:, t]) * mul[t] + add[t],
 * and bit t of masks[i] says out[i*32+t] >= thr[i] (so the caller only looks
 * at candidates that can enter query i's top-k). */
#define HS_TILE_Q 8
#define HS_TILE_R 32
void hs_score_tile(const float *XT, int64_t ldx, int64_t d, const float *QP,
                   const float *mul, const float *add, const float *thr, float *out,
                   uint32_t *masks);

/* Sum of n floats read as fast as the CPU can stream them (bandwidth probe). */
double hs_stream_sum(const float *x, int64_t n);

#endif
