/* kernels/hs_rabitq.c without Python, for a run under qemu-aarch64 (its NEON code products):
 * at every SIMD level the CPU has, the estimates and bounds equal the scalar level's bit for
 * bit, and the hard bound holds against a naive double-precision distance.
 * Built and run by tests/engine/test_rabitq.py (gcc here; aarch64-linux-gnu-gcc + qemu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hs_distance.h"
#include "hs_rabitq.h"

static uint64_t st = 0x1234567;
static double urand(void) {
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    return (double)(st >> 11) / 9007199254740992.0;
}
static float gauss(void) { return (float)(sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307 * urand())); }

int main(void) {
    const int64_t dims[] = {1, 63, 64, 130, 384}, n = 200, nq = 3;
    int fails = 0, checks = 0, levels = 0;
    for (int lv = 0; lv < 4; lv++) {
        if (!hs_simd_available(lv)) continue;
        levels++;
        for (int di = 0; di < 5; di++) {
            for (int bits = 1; bits <= 4; bits += 3) {
                for (int metric = 0; metric < 3; metric++) {
                    int64_t d = dims[di], cb = hs_rq_code_bytes(d, bits);
                    float *X = malloc(sizeof(float) * n * d), *Q = malloc(sizeof(float) * nq * d);
                    float *c = calloc((size_t)d, sizeof(float)), *f = malloc(sizeof(float) * n * HS_RQ_NFACT);
                    uint8_t *codes = malloc((size_t)(n * cb));
                    float *out[2][3];
                    for (int a = 0; a < 2; a++)
                        for (int b = 0; b < 3; b++) out[a][b] = malloc(sizeof(float) * n * nq);
                    for (int64_t i = 0; i < n * d; i++) X[i] = gauss();
                    for (int64_t i = 0; i < nq * d; i++) Q[i] = gauss();
                    for (int64_t j = 0; j < d; j++) c[j] = 0.1f * gauss();
                    hs_rq_params p = {d, bits, metric, 99, c};
                    hs_rq_encode(&p, X, n, codes, f);
                    for (int a = 0; a < 2; a++) {
                        hs_simd_force(a ? lv : HS_SIMD_SCALAR);
                        hs_rq_estimate(&p, codes, f, NULL, n, Q, nq, 1.9, out[a][0], out[a][1], out[a][2]);
                    }
                    for (int b = 0; b < 3; b++) {
                        checks++;
                        if (memcmp(out[0][b], out[1][b], sizeof(float) * n * nq)) {
                            fails++;
                            printf("level %d d %ld bits %d metric %d: output %d differs from scalar\n",
                                   lv, (long)d, bits, metric, b);
                        }
                    }
                    for (int64_t t = 0; t < nq; t++)
                        for (int64_t i = 0; i < n; i++) {
                            double s = 0, xx = 0, qq = 0;
                            for (int64_t j = 0; j < d; j++) {
                                double x = X[i * d + j], q = Q[t * d + j];
                                s += metric == 2 ? (x - q) * (x - q) : x * q, xx += x * x, qq += q * q;
                            }
                            if (metric == 1) s /= sqrt(xx * qq);
                            checks++;
                            if (fabs(s - out[1][0][t * n + i]) > out[1][2][t * n + i]) {
                                fails++;
                                printf("level %d d %ld bits %d metric %d: hard bound broken\n", lv,
                                       (long)d, bits, metric);
                            }
                        }
                    free(X), free(Q), free(c), free(f), free(codes);
                    for (int a = 0; a < 2; a++)
                        for (int b = 0; b < 3; b++) free(out[a][b]);
                }
            }
        }
        printf("  level %d checked\n", lv);
    }
    printf("%s: %d levels, %d checks, %d failed\n", fails ? "FAIL" : "ok", levels, checks, fails);
    return fails != 0;
}
