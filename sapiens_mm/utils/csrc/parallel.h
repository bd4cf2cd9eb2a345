/*
 * Fork-join over pthreads for the CPU kernels: run fn for job ids
 * 0 .. nthreads - 1, id 0 on the calling thread.
 */
#ifndef SAPIENS_MM_PARALLEL_H
#define SAPIENS_MM_PARALLEL_H

#include <pthread.h>

#define SAPIENS_MAX_THREADS 256

typedef struct {
    void *args;
    int id;
    int nthreads;
} ParallelJob;

/* Clamp a thread count to [1, SAPIENS_MAX_THREADS]. */
static inline int clamp_threads(int n) {
    return n < 1 ? 1 : n > SAPIENS_MAX_THREADS ? SAPIENS_MAX_THREADS : n;
}

/* Returns 0 when every job ran, -1 when a thread could not be started
 * (the jobs that started have finished; the caller must not trust the
 * output). */
static inline int run_parallel(void *(*fn)(void *), void *args,
                               int nthreads) {
    pthread_t th[SAPIENS_MAX_THREADS];
    ParallelJob jobs[SAPIENS_MAX_THREADS];
    nthreads = clamp_threads(nthreads);
    int started = 0;
    for (int i = 1; i < nthreads; i++) {
        jobs[i].args = args;
        jobs[i].id = i;
        jobs[i].nthreads = nthreads;
        if (pthread_create(&th[i], NULL, fn, &jobs[i]) != 0)
            break;
        started = i;
    }
    if (started == nthreads - 1) {
        jobs[0].args = args;
        jobs[0].id = 0;
        jobs[0].nthreads = nthreads;
        fn(&jobs[0]);
    }
    for (int i = 1; i <= started; i++)
        pthread_join(th[i], NULL);
    return started == nthreads - 1 ? 0 : -1;
}

#endif
