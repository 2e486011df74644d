#include <stdlib.h>
#include <string.h>
#include "hs_filter.h"
#include "hs_bitset.h"

#define CMP_LOOP(T, V)                                                             \
    do {                                                                           \
        const T *c = (const T *)ins->col;                                          \
        for (int64_t w = 0; w < nw; w++) {                                         \
            int64_t base = w * 64, end = base + 64 < n ? base + 64 : n;            \
            uint64_t bits = 0;                                                     \
            switch (ins->cmp) {                                                    \
            case HS_CMP_EQ: for (int64_t i = base; i < end; i++) bits |= (uint64_t)(c[i] == V) << (i - base); break; \
            case HS_CMP_NE: for (int64_t i = base; i < end; i++) bits |= (uint64_t)(c[i] != V) << (i - base); break; \
            case HS_CMP_LT: for (int64_t i = base; i < end; i++) bits |= (uint64_t)(c[i] < V) << (i - base); break;  \
            case HS_CMP_LE: for (int64_t i = base; i < end; i++) bits |= (uint64_t)(c[i] <= V) << (i - base); break; \
            case HS_CMP_GT: for (int64_t i = base; i < end; i++) bits |= (uint64_t)(c[i] > V) << (i - base); break;  \
            default:        for (int64_t i = base; i < end; i++) bits |= (uint64_t)(c[i] >= V) << (i - base); break; \
            }                                                                      \
            dst[w] = bits;                                                         \
        }                                                                          \
    } while (0)

static void and_present(uint64_t *dst, const uint8_t *present, int64_t n, int64_t nw) {
    for (int64_t w = 0; w < nw; w++) {
        int64_t base = w * 64, end = base + 64 < n ? base + 64 : n;
        uint64_t bits = 0;
        for (int64_t i = base; i < end; i++) bits |= (uint64_t)(present[i] != 0) << (i - base);
        dst[w] &= bits;
    }
}

static int eval_leaf(const hs_filter_instr *ins, int64_t n, int64_t nw, uint64_t *dst) {
    switch (ins->op) {
    case HS_F_I64: {
        int64_t v = ins->ival;
        CMP_LOOP(int64_t, v);
        break;
    }
    case HS_F_F64: {
        double v = ins->fval;
        CMP_LOOP(double, v);
        break;
    }
    case HS_F_CODE: {
        const int32_t *c = (const int32_t *)ins->col;
        const uint8_t *t = ins->table;
        uint64_t tl = (uint64_t)ins->table_len;
        for (int64_t w = 0; w < nw; w++) {
            int64_t base = w * 64, end = base + 64 < n ? base + 64 : n;
            uint64_t bits = 0;
            for (int64_t i = base; i < end; i++) {
                /* negative codes (missing) wrap to huge unsigned and fail the bound */
                uint64_t code = (uint64_t)(int64_t)c[i];
                bits |= (uint64_t)(code < tl && t[code]) << (i - base);
            }
            dst[w] = bits;
        }
        break;
    }
    case HS_F_PRESENT:
        memset(dst, 0xFF, (size_t)nw * 8);
        and_present(dst, ins->present, n, nw);
        return HS_OK;
    case HS_F_BITS:
        memcpy(dst, ins->bits, (size_t)nw * 8);
        return HS_OK;
    case HS_F_ALL:
        memset(dst, 0xFF, (size_t)nw * 8);
        return HS_OK;
    case HS_F_NONE:
        memset(dst, 0, (size_t)nw * 8);
        return HS_OK;
    default:
        return HS_EINVAL;
    }
    if (ins->present) and_present(dst, ins->present, n, nw);
    return HS_OK;
}

int hs_filter_eval(const hs_filter_instr *prog, int64_t nprog, int64_t n,
                   const uint64_t *live, uint64_t *out) {
    int64_t nw = HS_WORDS(n);
    /* pre-pass: validate the program and find the stack depth it needs */
    int64_t depth = 0, max_depth = 0;
    for (int64_t p = 0; p < nprog; p++) {
        int32_t op = prog[p].op;
        if (op == HS_F_AND || op == HS_F_OR) {
            if (prog[p].nargs < 1 || prog[p].nargs > depth) return HS_EINVAL;
            depth -= prog[p].nargs - 1;
        } else if (op == HS_F_NOT) {
            if (depth < 1) return HS_EINVAL;
        } else {
            if ((op == HS_F_I64 || op == HS_F_F64 || op == HS_F_CODE) && !prog[p].col) return HS_EINVAL;
            if (op == HS_F_PRESENT && !prog[p].present) return HS_EINVAL;
            if (op == HS_F_BITS && !prog[p].bits) return HS_EINVAL;
            depth++;
        }
        if (depth > max_depth) max_depth = depth;
    }
    if (depth != 1) return HS_EINVAL;
    if (nw == 0) return HS_OK;

    uint64_t *stack = (uint64_t *)malloc((size_t)max_depth * (size_t)nw * 8);
    if (!stack) return HS_ENOMEM;
    int64_t top = 0; /* number of bitsets on the stack */
    int rc = HS_OK;
    for (int64_t p = 0; p < nprog && rc == HS_OK; p++) {
        const hs_filter_instr *ins = &prog[p];
        if (ins->op == HS_F_AND || ins->op == HS_F_OR) {
            uint64_t *first = stack + (top - ins->nargs) * nw;
            for (int64_t a = 1; a < ins->nargs; a++) {
                const uint64_t *src = first + a * nw;
                if (ins->op == HS_F_AND) hs_bitset_and(first, src, nw);
                else hs_bitset_or(first, src, nw);
            }
            top -= ins->nargs - 1;
        } else if (ins->op == HS_F_NOT) {
            hs_bitset_not(stack + (top - 1) * nw, nw);
        } else {
            rc = eval_leaf(ins, n, nw, stack + top * nw);
            top++;
        }
    }
    if (rc == HS_OK) {
        memcpy(out, stack, (size_t)nw * 8);
        if (live) hs_bitset_and(out, live, nw);
        hs_bitset_clear_tail(out, n);
    }
    free(stack);
    return rc;
}
