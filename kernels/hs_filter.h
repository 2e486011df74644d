/* Filter evaluation: a postfix program over typed columns -> one bitset.
 *
 * The Python side validates the filter against the schema and compiles it
 * into this program once per query; evaluation is one call, never a callback
 * per row.
 */
#ifndef HS_FILTER_H
#define HS_FILTER_H

#include "hs_common.h"

/* leaves: push one bitset */
#define HS_F_I64 1      /* int64 column  <cmp> ival            */
#define HS_F_F64 2      /* float64 column <cmp> fval           */
#define HS_F_CODE 3     /* int32 code column: table[code] != 0 */
#define HS_F_PRESENT 4  /* present[row] != 0                   */
#define HS_F_BITS 5     /* a precomputed bitset (e.g. ids)     */
#define HS_F_ALL 6
#define HS_F_NONE 7
/* combinators */
#define HS_F_AND 10     /* pops nargs, pushes their AND */
#define HS_F_OR 11      /* pops nargs, pushes their OR  */
#define HS_F_NOT 12     /* complements the top          */

#define HS_CMP_EQ 0
#define HS_CMP_NE 1
#define HS_CMP_LT 2
#define HS_CMP_LE 3
#define HS_CMP_GT 4
#define HS_CMP_GE 5

typedef struct {
    int32_t op;
    int32_t cmp;
    int64_t nargs;
    const void *col;         /* int64_t*, double* or int32_t* */
    const uint8_t *present;  /* NULL: every row has a value */
    int64_t ival;
    double fval;
    const uint8_t *table;    /* HS_F_CODE lookup, indexed by code */
    int64_t table_len;
    const uint64_t *bits;    /* HS_F_BITS */
} hs_filter_instr;

/* Evaluates the program over rows [0, n) and ANDs the result with `live`
 * (NULL: all rows live). out has HS_WORDS(n) words. */
int hs_filter_eval(const hs_filter_instr *prog, int64_t nprog, int64_t n,
                   const uint64_t *live, uint64_t *out);

#endif
