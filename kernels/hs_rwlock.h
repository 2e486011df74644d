/* A phase-fair reader-writer lock: many concurrent readers, one writer.
 *
 * A waiting writer blocks new readers (writers are not starved by a stream of searches), and a
 * leaving writer first lets in the readers that were waiting for it (readers are not starved by
 * a stream of writes). The mutex inside is only ever held for a few instructions, never across
 * a wait, so a caller may take the non-blocking calls while it holds other locks of its own
 * (the Python GIL) and must release those only around the blocking ones.
 */
#ifndef HS_RWLOCK_H
#define HS_RWLOCK_H

#include <pthread.h>
#include <stdint.h>

typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t readers_cv; /* readers wait here for a writer to leave */
    pthread_cond_t writers_cv; /* writers wait here for readers and other writers */
    int64_t readers;           /* readers inside */
    int64_t waiting_readers;
    int64_t waiting_writers;
    int writer;                /* a writer is inside */
    int readers_turn;          /* set by a leaving writer while readers wait for it */
    uint64_t generation;       /* bumped by every writer on entry */
} hs_rwlock;

int hs_rwlock_init(hs_rwlock *l);
void hs_rwlock_destroy(hs_rwlock *l);

/* 1 and the lock is held for reading, or 0 when the reader would have to wait (nothing held). */
int hs_rwlock_try_read(hs_rwlock *l);
/* Blocks until the lock is held for reading. */
void hs_rwlock_read(hs_rwlock *l);
void hs_rwlock_read_unlock(hs_rwlock *l);
/* Blocks until the lock is held alone. */
void hs_rwlock_write(hs_rwlock *l);
void hs_rwlock_write_unlock(hs_rwlock *l);

#endif
