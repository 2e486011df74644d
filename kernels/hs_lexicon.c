/* Surface-word dictionary and one-pass batch tokenizer (see hs_lexicon.h). */
#include "hs_lexicon.h"

#include <stdlib.h>
#include <string.h>

#include "hs_hash.h"

typedef struct {
    uint64_t h;
    int64_t off; /* the word's bytes in keys */
    int32_t len;
    int32_t id; /* -1: empty entry */
} entry;

struct hs_lex {
    entry *tab;
    int64_t cap, count; /* cap a power of two; count <= cap * 7 / 10 */
    uint8_t *keys;
    int64_t keys_len, keys_cap;
};

/* byte classes of the ASCII tokenizer: what str.isalnum keeps, and what it lowercases */
enum { SEP = 0, WORD = 1, UPPER = 2, HIGH = 3 };
static uint8_t byte_class[256];
static int classes_ready;

static void init_classes(void) {
    if (classes_ready) return; /* idempotent: a race writes the same bytes */
    for (int c = 0; c < 256; c++) {
        uint8_t k = SEP;
        if (c >= 0x80) k = HIGH;
        else if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) k = WORD;
        else if (c >= 'A' && c <= 'Z') k = UPPER;
        byte_class[c] = k;
    }
    classes_ready = 1;
}

hs_lex *hs_lex_new(void) {
    init_classes();
    hs_lex *lx = calloc(1, sizeof(hs_lex));
    if (!lx) return NULL;
    lx->cap = 1024;
    lx->tab = malloc((size_t)lx->cap * sizeof(entry));
    if (!lx->tab) {
        free(lx);
        return NULL;
    }
    memset(lx->tab, 0xff, (size_t)lx->cap * sizeof(entry)); /* id = -1 everywhere */
    return lx;
}

void hs_lex_free(hs_lex *lx) {
    if (!lx) return;
    free(lx->tab);
    free(lx->keys);
    free(lx);
}

int64_t hs_lex_size(const hs_lex *lx) { return lx->count; }

/* Grows a byte buffer (doubling, from 4 KiB) so it holds at least `need` bytes. */
static int reserve_bytes(uint8_t **buf, int64_t *cap, int64_t need) {
    if (need <= *cap) return HS_OK;
    int64_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    uint8_t *nb = realloc(*buf, (size_t)c);
    if (!nb) return HS_ENOMEM;
    *buf = nb;
    *cap = c;
    return HS_OK;
}

static int64_t find_slot(const hs_lex *lx, uint64_t h, const uint8_t *p, int64_t n) {
    int64_t mask = lx->cap - 1, i = (int64_t)(h & (uint64_t)mask);
    for (;; i = (i + 1) & mask) {
        const entry *e = &lx->tab[i];
        if (e->id < 0) return i;
        if (e->h == h && e->len == n && memcmp(lx->keys + e->off, p, (size_t)n) == 0) return i;
    }
}

static int32_t lookup(const hs_lex *lx, uint64_t h, const uint8_t *p, int64_t n) {
    return lx->tab[find_slot(lx, h, p, n)].id;
}

int32_t hs_lex_get(const hs_lex *lx, const uint8_t *p, int64_t n) {
    return lookup(lx, hs_hash_bytes(p, n), p, n);
}

static int grow_table(hs_lex *lx) {
    int64_t cap = lx->cap * 2;
    entry *tab = malloc((size_t)cap * sizeof(entry));
    if (!tab) return HS_ENOMEM;
    memset(tab, 0xff, (size_t)cap * sizeof(entry));
    for (int64_t i = 0; i < lx->cap; i++) {
        entry e = lx->tab[i];
        if (e.id < 0) continue;
        int64_t j = (int64_t)(e.h & (uint64_t)(cap - 1));
        while (tab[j].id >= 0) j = (j + 1) & (cap - 1);
        tab[j] = e;
    }
    free(lx->tab);
    lx->tab = tab;
    lx->cap = cap;
    return HS_OK;
}

static int put_one(hs_lex *lx, const uint8_t *p, int64_t n, int32_t id) {
    if (id < 0 || n > INT32_MAX) return HS_EINVAL;
    uint64_t h = hs_hash_bytes(p, n);
    int64_t i = find_slot(lx, h, p, n);
    if (lx->tab[i].id >= 0) {
        lx->tab[i].id = id;
        return HS_OK;
    }
    if ((lx->count + 1) * 10 > lx->cap * 7) {
        if (grow_table(lx)) return HS_ENOMEM;
        i = find_slot(lx, h, p, n);
    }
    if (reserve_bytes(&lx->keys, &lx->keys_cap, lx->keys_len + n)) return HS_ENOMEM;
    if (n) memcpy(lx->keys + lx->keys_len, p, (size_t)n);
    lx->tab[i] = (entry){h, lx->keys_len, (int32_t)n, id};
    lx->keys_len += n;
    lx->count++;
    return HS_OK;
}

int hs_lex_put(hs_lex *lx, const uint8_t *buf, const int64_t *offs, const int32_t *ids, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (offs[i] > offs[i + 1]) return HS_EINVAL;
        int rc = put_one(lx, buf + offs[i], offs[i + 1] - offs[i], ids[i]);
        if (rc) return rc;
    }
    return HS_OK;
}

/* ---------------------------------------------------------------- batches */

static int push_tid(hs_lex_batch *b, int32_t t) {
    if (HS_UNLIKELY(b->ntok == b->tok_cap)) {
        int64_t cap = b->tok_cap ? b->tok_cap * 2 : 1024;
        int32_t *p = realloc(b->tids, (size_t)cap * sizeof(int32_t));
        if (!p) return HS_ENOMEM;
        b->tids = p;
        b->tok_cap = cap;
    }
    b->tids[b->ntok++] = t;
    return HS_OK;
}

static int grow_pending(hs_lex_batch *b) {
    int64_t cap = b->pend_cap ? b->pend_cap * 2 : 1024;
    int64_t *pend = malloc((size_t)cap * sizeof(int64_t));
    uint64_t *ph = malloc((size_t)cap * sizeof(uint64_t));
    if (!pend || !ph) {
        free(pend);
        free(ph);
        return HS_ENOMEM;
    }
    memset(pend, 0xff, (size_t)cap * sizeof(int64_t));
    for (int64_t i = 0; i < b->pend_cap; i++) {
        if (b->pend[i] < 0) continue;
        int64_t j = (int64_t)(b->pend_hash[i] & (uint64_t)(cap - 1));
        while (pend[j] >= 0) j = (j + 1) & (cap - 1);
        pend[j] = b->pend[i];
        ph[j] = b->pend_hash[i];
    }
    free(b->pend);
    free(b->pend_hash);
    b->pend = pend;
    b->pend_hash = ph;
    b->pend_cap = cap;
    return HS_OK;
}

/* Appends word p[0 .. n) as new word number b->nnew. */
static int add_new_word(hs_lex_batch *b, const uint8_t *p, int64_t n) {
    if (b->nnew + 2 > b->new_cap) {
        int64_t cap = b->new_cap ? b->new_cap * 2 : 256;
        int64_t *o = realloc(b->new_offs, (size_t)cap * sizeof(int64_t));
        if (!o) return HS_ENOMEM;
        if (b->nnew == 0) o[0] = 0;
        b->new_offs = o;
        b->new_cap = cap;
    }
    if (reserve_bytes(&b->new_buf, &b->new_buf_cap, b->new_len + n)) return HS_ENOMEM;
    memcpy(b->new_buf + b->new_len, p, (size_t)n);
    b->new_len += n;
    b->new_offs[++b->nnew] = b->new_len;
    return HS_OK;
}

/* The term id of one word: the dictionary's, else its pending id (-1 - new word index). */
static int word_tid(const hs_lex *lx, hs_lex_batch *b, const uint8_t *p, int64_t n) {
    if (HS_UNLIKELY(n > INT32_MAX)) return HS_EINVAL;
    uint64_t h = hs_hash_bytes(p, n);
    int32_t id = lookup(lx, h, p, n);
    if (HS_LIKELY(id >= 0)) return push_tid(b, id);
    if ((b->nnew + 1) * 2 > b->pend_cap && grow_pending(b)) return HS_ENOMEM;
    int64_t mask = b->pend_cap - 1, i = (int64_t)(h & (uint64_t)mask);
    for (; b->pend[i] >= 0; i = (i + 1) & mask) {
        int64_t j = b->pend[i];
        if (b->pend_hash[i] == h && b->new_offs[j + 1] - b->new_offs[j] == n &&
            memcmp(b->new_buf + b->new_offs[j], p, (size_t)n) == 0)
            return push_tid(b, (int32_t)(-1 - j));
    }
    if (b->nnew >= INT32_MAX) return HS_EINVAL;
    b->pend[i] = b->nnew;
    b->pend_hash[i] = h;
    if (add_new_word(b, p, n)) return HS_ENOMEM;
    return push_tid(b, (int32_t)(-b->nnew));
}

/* The words of one ASCII text; scratch holds a word being lowercased. */
static int ascii_text(const hs_lex *lx, hs_lex_batch *b, const uint8_t *p, const uint8_t *end, int lowercase,
                      uint8_t **scratch, int64_t *scap) {
    while (p < end) {
        while (p < end && byte_class[*p] == SEP) p++;
        if (p == end) break;
        if (byte_class[*p] == HIGH) return HS_EINVAL;
        const uint8_t *start = p;
        int upper = 0;
        for (; p < end && (byte_class[*p] == WORD || byte_class[*p] == UPPER); p++) upper |= byte_class[*p] == UPPER;
        int64_t n = p - start;
        const uint8_t *w = start;
        if (upper && lowercase) {
            if (n > *scap) {
                int64_t cap = *scap ? *scap : 64;
                while (cap < n) cap *= 2;
                uint8_t *s = realloc(*scratch, (size_t)cap);
                if (!s) return HS_ENOMEM;
                *scratch = s;
                *scap = cap;
            }
            for (int64_t j = 0; j < n; j++) (*scratch)[j] = start[j] | (byte_class[start[j]] == UPPER ? 0x20 : 0);
            w = *scratch;
        }
        int rc = word_tid(lx, b, w, n);
        if (rc) return rc;
    }
    return HS_OK;
}

/* The words of a presplit text: space-separated, taken as they are. */
static int presplit_text(const hs_lex *lx, hs_lex_batch *b, const uint8_t *p, const uint8_t *end) {
    while (p < end) {
        while (p < end && *p == ' ') p++;
        if (p == end) break;
        const uint8_t *start = p;
        while (p < end && *p != ' ') p++;
        int rc = word_tid(lx, b, start, p - start);
        if (rc) return rc;
    }
    return HS_OK;
}

int hs_lex_tokenize(const hs_lex *lx, const uint8_t *buf, const int64_t *offs, const uint8_t *presplit,
                    int64_t n, int lowercase, hs_lex_batch *b) {
    init_classes();
    b->doc_offs = malloc((size_t)(n + 1) * sizeof(int64_t));
    if (!b->doc_offs) return HS_ENOMEM;
    /* about one token per 6-7 bytes of English: one allocation in the common case */
    int64_t guess = n ? (offs[n] - offs[0]) / 6 + 16 : 16;
    b->tids = malloc((size_t)guess * sizeof(int32_t));
    if (!b->tids) return HS_ENOMEM;
    b->tok_cap = guess;
    uint8_t *scratch = NULL;
    int64_t scap = 0;
    int rc = HS_OK;
    for (int64_t i = 0; i < n && rc == HS_OK; i++) {
        b->doc_offs[i] = b->ntok;
        if (offs[i] > offs[i + 1]) rc = HS_EINVAL;
        else if (presplit[i]) rc = presplit_text(lx, b, buf + offs[i], buf + offs[i + 1]);
        else rc = ascii_text(lx, b, buf + offs[i], buf + offs[i + 1], lowercase, &scratch, &scap);
    }
    b->doc_offs[n] = b->ntok;
    free(scratch);
    return rc;
}

int hs_lex_resolve(hs_lex *lx, hs_lex_batch *b, const int32_t *ids) {
    for (int64_t j = 0; j < b->nnew; j++)
        if (ids[j] < 0) return HS_EINVAL;
    for (int64_t j = 0; j < b->nnew; j++) {
        int rc = put_one(lx, b->new_buf + b->new_offs[j], b->new_offs[j + 1] - b->new_offs[j], ids[j]);
        if (rc) return rc;
    }
    if (b->nnew)
        for (int64_t t = 0; t < b->ntok; t++)
            if (b->tids[t] < 0) b->tids[t] = ids[-1 - (int64_t)b->tids[t]];
    return HS_OK;
}

void hs_lex_batch_free(hs_lex_batch *b) {
    free(b->tids);
    free(b->doc_offs);
    free(b->new_buf);
    free(b->new_offs);
    free(b->pend);
    free(b->pend_hash);
    memset(b, 0, sizeof(*b));
}
