/*
 * Exact (non-causal, unmasked) scaled dot-product attention for bf16
 * tensors with head size 64 on x86 CPUs with AVX512_BF16.
 *
 * out = softmax(q k^T * scale) v per (batch, head); query head h reads K/V
 * head h / (heads / kv_heads) (grouped-query attention).
 *
 * Both products run on VDPBF16PS (bf16 pairs, float32 accumulation): K and
 * V of each head are first repacked into the pair-interleaved layouts the
 * instruction reads; each task then takes 8 query rows, computes their
 * scores against all keys into a float32 row buffer (kept in L1 / L2),
 * the exact softmax (max, exp, sum in float32; probabilities rounded to bf16
 * for the second product, as PyTorch's CPU flash kernel does), and
 * accumulates P v in float32 before one division and rounding to bf16.
 *
 * Plain C with pthreads (parallel.h), no PyTorch headers: it builds in
 * about a second and is called through ctypes (which releases the GIL).
 */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parallel.h"
#include "simd_math.h"

#define HD 64    /* head size */
#define PAIRS 32 /* HD / 2 */
#define ROWS 8   /* query rows per task */
#define KBLK 32  /* keys per score micro-kernel (two vectors of 16) */

typedef uint16_t bf16;

typedef struct {
    const bf16 *q, *k, *v;
    bf16 *o;
    int64_t batch, heads, kv_heads, n, m; /* m: keys (== n) */
    int64_t qs[3], ks[3], vs[3], os[3];   /* strides of dims 0-2, elements */
    float scale;
    int64_t mpad; /* keys rounded up to KBLK */
    bf16 *kpack, *vpack;
    int nthreads;
    volatile int failed; /* a worker could not allocate its buffers */
} Args;

/* K of one head -> [key block of 16][pair][16 keys][2] (zero padded). */
static void pack_k(const Args *a, int64_t b, int64_t h, bf16 *dst) {
    const bf16 *src = a->k + b * a->ks[0] + h * a->ks[1];
    int64_t blocks = a->mpad / 16;
    for (int64_t kb = 0; kb < blocks; kb++) {
        for (int p = 0; p < PAIRS; p++) {
            uint32_t *d = (uint32_t *)(dst + ((kb * PAIRS + p) * 16) * 2);
            for (int j = 0; j < 16; j++) {
                int64_t key = kb * 16 + j;
                d[j] = key < a->m
                           ? *(const uint32_t *)(src + key * a->ks[2] + 2 * p)
                           : 0u;
            }
        }
    }
}

/* V of one head -> [key pair][64 dims][2] (zero padded). */
static void pack_v(const Args *a, int64_t b, int64_t h, bf16 *dst) {
    const bf16 *src = a->v + b * a->vs[0] + h * a->vs[1];
    for (int64_t jp = 0; jp < a->mpad / 2; jp++) {
        int64_t j0 = 2 * jp, j1 = 2 * jp + 1;
        const bf16 *r0 = j0 < a->m ? src + j0 * a->vs[2] : NULL;
        const bf16 *r1 = j1 < a->m ? src + j1 * a->vs[2] : NULL;
        bf16 *d = dst + jp * HD * 2;
        for (int c = 0; c < HD; c++) {
            d[2 * c] = r0 ? r0[c] : 0;
            d[2 * c + 1] = r1 ? r1[c] : 0;
        }
    }
}

static void *pack_worker(void *arg) {
    ParallelJob *job = (ParallelJob *)arg;
    Args *a = (Args *)job->args;
    int64_t heads = a->batch * a->kv_heads;
    for (int64_t t = job->id; t < heads; t += a->nthreads) {
        int64_t b = t / a->kv_heads, h = t % a->kv_heads;
        pack_k(a, b, h, a->kpack + t * a->mpad * HD);
        pack_v(a, b, h, a->vpack + t * a->mpad * HD);
    }
    return NULL;
}

static inline __m512bh as_bh(__m512i x) { return (__m512bh)x; }

/* Scores of ROWS query rows (pointers qr) against keys [0, mpad). */
static void scores(const Args *a, const bf16 *const *qr, const bf16 *kp,
                   float *s) {
    for (int64_t kb = 0; kb < a->mpad; kb += KBLK) {
        __m512 acc[ROWS][2];
        for (int r = 0; r < ROWS; r++)
            acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        const bf16 *k0 = kp + (kb / 16) * PAIRS * 32;
        const bf16 *k1 = k0 + PAIRS * 32;
        for (int p = 0; p < PAIRS; p++) {
            __m512bh b0 = as_bh(_mm512_loadu_si512(k0 + p * 32));
            __m512bh b1 = as_bh(_mm512_loadu_si512(k1 + p * 32));
            for (int r = 0; r < ROWS; r++) {
                __m512bh q2 = as_bh(
                    _mm512_set1_epi32(((const int32_t *)qr[r])[p]));
                acc[r][0] = _mm512_dpbf16_ps(acc[r][0], q2, b0);
                acc[r][1] = _mm512_dpbf16_ps(acc[r][1], q2, b1);
            }
        }
        for (int r = 0; r < ROWS; r++) {
            _mm512_storeu_ps(s + r * a->mpad + kb, acc[r][0]);
            _mm512_storeu_ps(s + r * a->mpad + kb + 16, acc[r][1]);
        }
    }
}

/* Softmax numerators of one score row (overwritten) as bf16 in p (0 past
 * the last key); returns their float32 sum. */
static float softmax_row(const Args *a, float *s, bf16 *p) {
    float sum = softmax_numerators(s, a->m, a->mpad, a->scale);
    for (int64_t j = 0; j < a->mpad; j += 16) {
        __m256i e = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + j));
        _mm256_storeu_si256((__m256i *)(p + j), e);
    }
    return sum;
}

/* out rows += P v for 4 rows of P (bf16, mpad each). */
static void pv4(const Args *a, const bf16 *p, const bf16 *vp, float *out) {
    __m512 acc[4][4];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
            acc[r][c] = _mm512_setzero_ps();
    for (int64_t jp = 0; jp < a->mpad / 2; jp++) {
        const bf16 *vv = vp + jp * HD * 2;
        __m512bh v0 = as_bh(_mm512_loadu_si512(vv));
        __m512bh v1 = as_bh(_mm512_loadu_si512(vv + 32));
        __m512bh v2 = as_bh(_mm512_loadu_si512(vv + 64));
        __m512bh v3 = as_bh(_mm512_loadu_si512(vv + 96));
        for (int r = 0; r < 4; r++) {
            __m512bh w = as_bh(_mm512_set1_epi32(
                ((const int32_t *)(p + r * a->mpad))[jp]));
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], w, v0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], w, v1);
            acc[r][2] = _mm512_dpbf16_ps(acc[r][2], w, v2);
            acc[r][3] = _mm512_dpbf16_ps(acc[r][3], w, v3);
        }
    }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
            _mm512_storeu_ps(out + r * HD + 16 * c, acc[r][c]);
}

static void *attend_worker(void *arg) {
    ParallelJob *job = (ParallelJob *)arg;
    Args *a = (Args *)job->args;
    int64_t row_blocks = (a->n + ROWS - 1) / ROWS;
    int64_t tasks = a->batch * a->heads * row_blocks;
    int64_t per = (tasks + a->nthreads - 1) / a->nthreads;
    int64_t t0 = job->id * per, t1 = t0 + per < tasks ? t0 + per : tasks;
    float *s = aligned_alloc(64, sizeof(float) * ROWS * a->mpad);
    bf16 *p = aligned_alloc(64, sizeof(bf16) * ROWS * a->mpad);
    float out[ROWS * HD];
    float sums[ROWS];
    if (!s || !p) {
        a->failed = 1;
        t1 = t0;
    }
    int64_t group = a->heads / a->kv_heads;
    for (int64_t t = t0; t < t1; t++) {
        int64_t b = t / (a->heads * row_blocks);
        int64_t h = (t / row_blocks) % a->heads;
        int64_t i0 = (t % row_blocks) * ROWS;
        int64_t kvh = b * a->kv_heads + h / group;
        const bf16 *kp = a->kpack + kvh * a->mpad * HD;
        const bf16 *vp = a->vpack + kvh * a->mpad * HD;
        const bf16 *qr[ROWS];
        for (int r = 0; r < ROWS; r++) { /* rows past n repeat the last */
            int64_t i = i0 + r < a->n ? i0 + r : a->n - 1;
            qr[r] = a->q + b * a->qs[0] + h * a->qs[1] + i * a->qs[2];
        }
        scores(a, qr, kp, s);
        for (int r = 0; r < ROWS; r++)
            sums[r] = softmax_row(a, s + r * a->mpad, p + r * a->mpad);
        pv4(a, p, vp, out);
        pv4(a, p + 4 * a->mpad, vp, out + 4 * HD);
        for (int r = 0; r < ROWS && i0 + r < a->n; r++) {
            bf16 *dst = a->o + b * a->os[0] + h * a->os[1] +
                        (i0 + r) * a->os[2];
            __m512 inv = _mm512_set1_ps(1.0f / sums[r]);
            for (int c = 0; c < 4; c++) {
                __m512 y = _mm512_mul_ps(
                    _mm512_loadu_ps(out + r * HD + 16 * c), inv);
                _mm256_storeu_si256((__m256i *)(dst + 16 * c),
                                    (__m256i)_mm512_cvtneps_pbh(y));
            }
        }
    }
    free(s);
    free(p);
    return NULL;
}

/* Returns 0 on success, -1 when memory or threads ran out. Tensors are
 * (batch, heads, n, 64) with any strides on dims 0-2 and a unit stride on
 * the last; k / v have kv_heads heads and m == n keys. */
int sapiens_attention_bf16(const bf16 *q, const bf16 *k, const bf16 *v,
                           bf16 *o, int64_t batch, int64_t heads,
                           int64_t kv_heads, int64_t n, const int64_t *qs,
                           const int64_t *ks, const int64_t *vs,
                           const int64_t *os, float scale, int nthreads) {
    Args a;
    memset(&a, 0, sizeof(a));
    a.q = q, a.k = k, a.v = v, a.o = o;
    a.batch = batch, a.heads = heads, a.kv_heads = kv_heads;
    a.n = a.m = n;
    for (int i = 0; i < 3; i++) {
        a.qs[i] = qs[i], a.ks[i] = ks[i], a.vs[i] = vs[i], a.os[i] = os[i];
    }
    a.scale = scale;
    a.mpad = (n + KBLK - 1) / KBLK * KBLK;
    a.nthreads = clamp_threads(nthreads);
    size_t bytes = sizeof(bf16) * batch * kv_heads * a.mpad * HD;
    a.kpack = aligned_alloc(64, (bytes + 63) / 64 * 64);
    a.vpack = aligned_alloc(64, (bytes + 63) / 64 * 64);
    int rc = -1;
    if (a.kpack && a.vpack && run_parallel(pack_worker, &a, a.nthreads) == 0)
        rc = run_parallel(attend_worker, &a, a.nthreads) == 0 && !a.failed
                 ? 0
                 : -1;
    free(a.kpack);
    free(a.vpack);
    return rc;
}
