/* A text field's surface-word dictionary in C: UTF-8 word -> term id, and a tokenizer that
 * turns a batch of texts into term ids in one pass, so indexing does no Python work per token.
 *
 * The dictionary only caches what the Python side decides: a word it has never seen is handed
 * back (once per batch, however often it occurs) for the analyzer to stem, and the caller
 * gives its term id to hs_lex_resolve. Stemming and every non-ASCII rule thus stay in Python.
 *
 * Two kinds of text, chosen per text by the caller:
 *   ASCII (presplit[i] = 0): a word is a run of [0-9A-Za-z]; every other byte separates words
 *     (exactly what str.isalnum keeps of ASCII); A-Z are lowercased when asked. A byte >= 0x80
 *     is an error (HS_EINVAL): the caller sends such texts presplit.
 *   presplit (presplit[i] = 1): the words the Python analyzer made, joined by single spaces;
 *     taken byte for byte (already lowercased and normalised), split at 0x20 only.
 * Not thread-safe for writes: the caller's writer lock serialises them. */
#ifndef HS_LEXICON_H
#define HS_LEXICON_H

#include "hs_common.h"

typedef struct hs_lex hs_lex;

hs_lex *hs_lex_new(void);
void hs_lex_free(hs_lex *lx);
int64_t hs_lex_size(const hs_lex *lx); /* words held */
/* The id of word p[0 .. n), or -1. */
int32_t hs_lex_get(const hs_lex *lx, const uint8_t *p, int64_t n);
/* Sets the ids of n words buf[offs[i] .. offs[i+1]) (ids >= 0; an existing word is updated). */
int hs_lex_put(hs_lex *lx, const uint8_t *buf, const int64_t *offs, const int32_t *ids, int64_t n);

/* One tokenised batch. tids holds every token's term id, text after text (doc_offs[i] ..
 * doc_offs[i+1] are text i's tokens, in order); a word not in the dictionary has the id
 * -1 - j, j its index among the batch's new words, which are new_buf[new_offs[j] ..
 * new_offs[j+1]) in order of first occurrence, each once. All malloc'd; hs_lex_batch_free. */
typedef struct {
    int32_t *tids;
    int64_t ntok, tok_cap;
    int64_t *doc_offs; /* n + 1 */
    uint8_t *new_buf;
    int64_t new_len, new_buf_cap;
    int64_t *new_offs; /* nnew + 1 */
    int64_t nnew, new_cap;
    /* the batch's own table of new words (index into new_offs, -1 empty) */
    int64_t *pend;
    uint64_t *pend_hash;
    int64_t pend_cap;
} hs_lex_batch;

/* Tokenises n texts buf[offs[i] .. offs[i+1]) into *out (zeroed by the caller; freed with
 * hs_lex_batch_free even on failure). lowercase applies to ASCII texts. */
int hs_lex_tokenize(const hs_lex *lx, const uint8_t *buf, const int64_t *offs, const uint8_t *presplit,
                    int64_t n, int lowercase, hs_lex_batch *out);
/* Gives the batch's new words their ids (ids[j] >= 0 for new word j): adds them to the
 * dictionary and replaces every pending id in out->tids. */
int hs_lex_resolve(hs_lex *lx, hs_lex_batch *b, const int32_t *ids);
void hs_lex_batch_free(hs_lex_batch *b);

#endif
