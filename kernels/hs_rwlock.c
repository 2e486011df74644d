/* Phase-fair reader-writer lock (see hs_rwlock.h). */
#include "hs_rwlock.h"

#include "hs_common.h"

int hs_rwlock_init(hs_rwlock *l) {
    l->readers = l->waiting_readers = l->waiting_writers = 0;
    l->writer = l->readers_turn = 0;
    l->generation = 0;
    if (pthread_mutex_init(&l->mutex, NULL)) return HS_ENOMEM;
    if (pthread_cond_init(&l->readers_cv, NULL)) {
        pthread_mutex_destroy(&l->mutex);
        return HS_ENOMEM;
    }
    if (pthread_cond_init(&l->writers_cv, NULL)) {
        pthread_cond_destroy(&l->readers_cv);
        pthread_mutex_destroy(&l->mutex);
        return HS_ENOMEM;
    }
    return HS_OK;
}

void hs_rwlock_destroy(hs_rwlock *l) {
    pthread_cond_destroy(&l->writers_cv);
    pthread_cond_destroy(&l->readers_cv);
    pthread_mutex_destroy(&l->mutex);
}

/* A reader must wait while a writer is inside, or while one waits and it is not the readers'
 * turn (the turn a leaving writer gives the readers that waited for it). */
static inline int reader_blocked(const hs_rwlock *l) {
    return l->writer || (l->waiting_writers && !l->readers_turn);
}

int hs_rwlock_try_read(hs_rwlock *l) {
    pthread_mutex_lock(&l->mutex);
    int ok = !reader_blocked(l);
    if (ok) l->readers++;
    pthread_mutex_unlock(&l->mutex);
    return ok;
}

void hs_rwlock_read(hs_rwlock *l) {
    pthread_mutex_lock(&l->mutex);
    if (reader_blocked(l)) {
        l->waiting_readers++;
        while (reader_blocked(l)) pthread_cond_wait(&l->readers_cv, &l->mutex);
        if (!--l->waiting_readers) {
            /* the last reader of the turn is in: writers may queue again */
            l->readers_turn = 0;
            if (l->waiting_writers) pthread_cond_broadcast(&l->writers_cv);
        }
    }
    l->readers++;
    pthread_mutex_unlock(&l->mutex);
}

void hs_rwlock_read_unlock(hs_rwlock *l) {
    pthread_mutex_lock(&l->mutex);
    if (!--l->readers && l->waiting_writers) pthread_cond_broadcast(&l->writers_cv);
    pthread_mutex_unlock(&l->mutex);
}

void hs_rwlock_write(hs_rwlock *l) {
    pthread_mutex_lock(&l->mutex);
    l->waiting_writers++;
    while (l->writer || l->readers || l->readers_turn) pthread_cond_wait(&l->writers_cv, &l->mutex);
    l->waiting_writers--;
    l->writer = 1;
    l->generation++;
    pthread_mutex_unlock(&l->mutex);
}

void hs_rwlock_write_unlock(hs_rwlock *l) {
    pthread_mutex_lock(&l->mutex);
    l->writer = 0;
    l->readers_turn = l->waiting_readers > 0;
    pthread_cond_broadcast(&l->readers_cv);
    pthread_cond_broadcast(&l->writers_cv);
    pthread_mutex_unlock(&l->mutex);
}
