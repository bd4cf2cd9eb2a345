/*
 * Parallel loops of the CPU kernels, on PyTorch's intra-op thread pool.
 *
 * The kernels are compiled with -fopenmp and linked against the GNU OpenMP
 * runtime by its soname (libgomp.so.1), the runtime PyTorch's Linux builds
 * load (torch/lib/libgomp.so.1) and run their own parallel loops and MKL's
 * and oneDNN's GEMMs on. A process holds one library per soname, so the
 * kernels' parallel regions run on the worker threads the GEMMs before them
 * ran on: the number PyTorch uses (torch.get_num_threads(), passed by the
 * caller, as at::parallel_for takes it), where OMP_PROC_BIND and the
 * process's CPU affinity put them, and no second set of threads competes
 * with OpenMP workers still spinning after the last GEMM.
 */
#ifndef SAPIENS_MM_PARALLEL_H
#define SAPIENS_MM_PARALLEL_H

#include <omp.h>
#include <stdint.h>

typedef struct {
    void *args;
    int id;       /* this job, 0 .. njobs - 1 */
    int nthreads; /* the number of jobs */
} ParallelJob;

/* Run fn for job ids 0 .. njobs - 1 on up to nthreads OpenMP threads (the
 * calling thread is one of them): serially for one job or one thread, else
 * in one parallel region whose team takes the jobs in turn (a job count
 * that is not the team size still runs every job once). */
static inline void run_parallel(void *(*fn)(void *), void *args, int njobs,
                                int nthreads) {
    if (njobs < 1)
        return;
    if (njobs == 1 || nthreads <= 1 || omp_in_parallel()) {
        for (int i = 0; i < njobs; i++) {
            ParallelJob job = {args, i, njobs};
            fn(&job);
        }
        return;
    }
    if (nthreads > njobs)
        nthreads = njobs;
#pragma omp parallel num_threads(nthreads)
    {
        int team = omp_get_num_threads();
        for (int i = omp_get_thread_num(); i < njobs; i += team) {
            ParallelJob job = {args, i, njobs};
            fn(&job);
        }
    }
}

/* Jobs for an element-wise pass over `elements` values on up to nthreads
 * threads: threads only pay off on big tensors, so one job per 64k values,
 * at least one, at most nthreads. */
static inline int parallel_jobs(int64_t elements, int nthreads) {
    int64_t useful = elements / 65536;
    nthreads = nthreads < 1 ? 1 : nthreads;
    return useful < nthreads ? (useful < 1 ? 1 : (int)useful) : nthreads;
}

#endif
