/*
 * RMSNorm of bf16 or float32 rows on x86 CPUs with AVX-512, for inference.
 *
 * out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * w, per row of d channels, with
 * PyTorch's semantics: everything in float32 (the weight bf16 or float32;
 * the normalised value, then its product with the weight) and, for bf16
 * rows, one rounding to nearest even at the end, as PyTorch's ``rms_norm``
 * does for a bf16 input and weight, and as the float32 norm of the upcast
 * input followed by a cast back to bf16 (a float32 model under autocast).
 * Only the order of the float32 sum of squares may differ from PyTorch's
 * reduction.
 *
 * One pass reads each row once and writes it once (PyTorch's composite
 * runs five element-wise kernels with float32 temporaries). Rows are split
 * over PyTorch's OpenMP threads (parallel.h); plain C, called through
 * ctypes.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "parallel.h"

typedef uint16_t bf16;

typedef struct {
    const void *x;
    const void *w;
    void *o;
    int64_t rows, d, xs, os; /* row strides in elements */
    int x_f32;               /* x and o are float32 (else bf16) */
    int w_f32;
    float eps;
} NormArgs;

static inline __m512 load_bf16(const bf16 *p, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m512 load_x(const NormArgs *a, const void *x, int64_t c,
                             __mmask16 m) {
    return a->x_f32 ? _mm512_maskz_loadu_ps(m, (const float *)x + c)
                    : load_bf16((const bf16 *)x + c, m);
}

static void norm_row(const NormArgs *a, const void *x, void *o) {
    const int64_t d = a->d;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t c = 0; c < d; c += 16) {
        __mmask16 m = d - c >= 16 ? 0xffff : (__mmask16)((1u << (d - c)) - 1);
        __m512 v = load_x(a, x, c, m);
        acc = _mm512_fmadd_ps(v, v, acc);
    }
    float r = 1.0f / sqrtf(_mm512_reduce_add_ps(acc) / (float)d + a->eps);
    __m512 vr = _mm512_set1_ps(r);
    for (int64_t c = 0; c < d; c += 16) {
        __mmask16 m = d - c >= 16 ? 0xffff : (__mmask16)((1u << (d - c)) - 1);
        __m512 y = _mm512_mul_ps(load_x(a, x, c, m), vr);
        __m512 w = a->w_f32 ? _mm512_maskz_loadu_ps(m, (const float *)a->w + c)
                            : load_bf16((const bf16 *)a->w + c, m);
        y = _mm512_mul_ps(y, w);
        if (a->x_f32)
            _mm512_mask_storeu_ps((float *)o + c, m, y);
        else
            _mm256_mask_storeu_epi16((bf16 *)o + c, m,
                                     (__m256i)_mm512_cvtneps_pbh(y));
    }
}

static void *norm_worker(void *arg) {
    ParallelJob *job = (ParallelJob *)arg;
    NormArgs *a = (NormArgs *)job->args;
    int64_t per = (a->rows + job->nthreads - 1) / job->nthreads;
    int64_t r0 = job->id * per;
    int64_t r1 = r0 + per < a->rows ? r0 + per : a->rows;
    size_t es = a->x_f32 ? sizeof(float) : sizeof(bf16);
    for (int64_t r = r0; r < r1; r++)
        norm_row(a, (const char *)a->x + es * r * a->xs,
                 (char *)a->o + es * r * a->os);
    return NULL;
}

/* Returns 0. */
int sapiens_rms_norm(const void *x, const void *w, void *o,
                          int64_t rows, int64_t d, int64_t xs, int64_t os,
                          int x_f32, int w_f32, float eps, int nthreads) {
    NormArgs a;
    memset(&a, 0, sizeof(a));
    a.x = x, a.w = w, a.o = o;
    a.rows = rows, a.d = d, a.xs = xs, a.os = os;
    a.x_f32 = x_f32, a.w_f32 = w_f32, a.eps = eps;
    run_parallel(norm_worker, &a, parallel_jobs(rows * d, nthreads),
                 nthreads);
    return 0;
}
