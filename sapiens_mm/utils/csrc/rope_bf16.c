/*
 * Sapiens2's bf16 rotary position embedding of q or k in one pass, for
 * inference on x86 CPUs with AVX-512.
 *
 * For every (batch, head, token) row x of head size d (a multiple of 32):
 *   y = bf16(x) (every token, the unrotated prefix ones too);
 *   rotated tokens t >= prefix, with the bf16 tables s, c of row t - prefix
 *   and h = d / 2:
 *     a = bf16(y * c),  b = bf16(y * swap(s))   (swap: the two halves of s)
 *     out[:h] = bf16(a[:h] - b[h:]),  out[h:] = bf16(a[h:] + b[:h])
 * which is ``y * cos + rotate_half(y) * sin`` as the official model's bf16
 * ops compute it: each op in float32, rounded once to bf16 (to nearest
 * even, as PyTorch). The products of two bf16 numbers are exact in
 * float32, so the bits are those of PyTorch's bf16 ops. The output is
 * written as bf16 or float32 (the input's dtype; bf16 values are exact in
 * float32).
 *
 * Plain C on PyTorch's OpenMP threads (parallel.h), called through ctypes.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "parallel.h"

typedef uint16_t bf16;

typedef struct {
    const void *x;
    void *o;
    const bf16 *sin, *cos; /* (rotated tokens, d), contiguous */
    int64_t batch, heads, n, d, prefix;
    int64_t xs[3], os[3]; /* strides of dims 0-2, elements */
    int f32;              /* x and o are float32 (else bf16) */
} RopeArgs;

static inline __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m256i narrow(__m512 v) { /* to bf16, nearest even */
    return (__m256i)_mm512_cvtneps_pbh(v);
}

/* 16 lanes of x as float32 values rounded to bf16. */
static inline __m512 load_x(const RopeArgs *a, const void *row, int64_t c) {
    if (a->f32)
        return widen(narrow(_mm512_loadu_ps((const float *)row + c)));
    return widen(_mm256_loadu_si256((const __m256i *)((const bf16 *)row + c)));
}

static inline void store_o(const RopeArgs *a, void *row, int64_t c,
                           __m256i v) {
    if (a->f32)
        _mm512_storeu_ps((float *)row + c, widen(v));
    else
        _mm256_storeu_si256((__m256i *)((bf16 *)row + c), v);
}

static void rope_row(const RopeArgs *a, const void *x, void *o, int64_t t) {
    int64_t d = a->d, h = d / 2;
    if (t < a->prefix) {
        for (int64_t c = 0; c < d; c += 16)
            store_o(a, o, c, narrow(load_x(a, x, c)));
        return;
    }
    const bf16 *s = a->sin + (t - a->prefix) * d;
    const bf16 *cs = a->cos + (t - a->prefix) * d;
    for (int64_t c = 0; c < h; c += 16) {
        __m512 y1 = load_x(a, x, c), y2 = load_x(a, x, c + h);
        __m512 c1 = widen(_mm256_loadu_si256((const __m256i *)(cs + c)));
        __m512 c2 = widen(_mm256_loadu_si256((const __m256i *)(cs + c + h)));
        __m512 s1 = widen(_mm256_loadu_si256((const __m256i *)(s + c)));
        __m512 s2 = widen(_mm256_loadu_si256((const __m256i *)(s + c + h)));
        /* a = y * c; b = y * swap(s): b[:h] = y1 * s2, b[h:] = y2 * s1 */
        __m512 a1 = widen(narrow(_mm512_mul_ps(y1, c1)));
        __m512 a2 = widen(narrow(_mm512_mul_ps(y2, c2)));
        __m512 b1 = widen(narrow(_mm512_mul_ps(y1, s2)));
        __m512 b2 = widen(narrow(_mm512_mul_ps(y2, s1)));
        store_o(a, o, c, narrow(_mm512_sub_ps(a1, b2)));
        store_o(a, o, c + h, narrow(_mm512_add_ps(a2, b1)));
    }
}

static void *rope_worker(void *arg) {
    ParallelJob *job = (ParallelJob *)arg;
    RopeArgs *a = (RopeArgs *)job->args;
    int64_t rows = a->batch * a->n * a->heads;
    int64_t per = (rows + job->nthreads - 1) / job->nthreads;
    int64_t r0 = job->id * per, r1 = r0 + per < rows ? r0 + per : rows;
    size_t es = a->f32 ? sizeof(float) : sizeof(bf16);
    for (int64_t r = r0; r < r1; r++) { /* rows ordered (batch, token, head) */
        int64_t b = r / (a->n * a->heads);
        int64_t t = (r / a->heads) % a->n;
        int64_t hd = r % a->heads;
        const char *x = (const char *)a->x +
                        es * (b * a->xs[0] + hd * a->xs[1] + t * a->xs[2]);
        char *o = (char *)a->o +
                  es * (b * a->os[0] + hd * a->os[1] + t * a->os[2]);
        rope_row(a, x, o, t);
    }
    return NULL;
}

/* Returns 0. x and o are
 * (batch, heads, n, d) with any strides on dims 0-2 and a unit stride on
 * the last; sin / cos are (n - prefix, d) bf16, contiguous; d is a
 * multiple of 32. */
int sapiens_rope_bf16(const void *x, void *o, const bf16 *sin,
                      const bf16 *cos, int64_t batch, int64_t heads,
                      int64_t n, int64_t d, int64_t prefix, const int64_t *xs,
                      const int64_t *os, int f32, int nthreads) {
    RopeArgs a;
    memset(&a, 0, sizeof(a));
    a.x = x, a.o = o, a.sin = sin, a.cos = cos;
    a.batch = batch, a.heads = heads, a.n = n, a.d = d, a.prefix = prefix;
    for (int i = 0; i < 3; i++)
        a.xs[i] = xs[i], a.os[i] = os[i];
    a.f32 = f32;
    run_parallel(rope_worker, &a,
                 parallel_jobs(batch * heads * n * d, nthreads), nthreads);
    return 0;
}
