/*
 * Exact (non-causal, unmasked) scaled dot-product attention for float32
 * tensors with head size 64 on x86 CPUs with AVX-512.
 *
 * out = softmax(q k^T * scale) v per (batch, head); query head h reads K/V
 * head h / (heads / kv_heads) (grouped-query attention).
 *
 * The layout of the bf16 kernel (attention_bf16.c) with float32 FMAs: K of
 * each head is first transposed into blocks of 16 keys ([block][dim][16
 * keys]); each task takes 8 query rows, computes their scores against all
 * keys into a float32 row buffer (kept in L1 / L2), the exact softmax in
 * float32 (numerators kept in float32), and accumulates P v from V copied
 * to contiguous rows, before one division per output row.
 *
 * Plain C with pthreads (parallel.h), no PyTorch headers, called through
 * ctypes (which releases the GIL).
 */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parallel.h"
#include "simd_math.h"

#define HD 64   /* head size */
#define ROWS 8  /* query rows per task */
#define KBLK 32 /* keys per score micro-kernel (two vectors of 16) */

typedef struct {
    const float *q, *k, *v;
    float *o;
    int64_t batch, heads, kv_heads, n;
    int64_t qs[3], ks[3], vs[3], os[3]; /* strides of dims 0-2, elements */
    float scale;
    int64_t mpad; /* keys rounded up to KBLK */
    float *kpack, *vpack;
    volatile int failed; /* a worker could not allocate its buffers */
} Args32;

/* K of one head -> [key block of 16][dim][16 keys] (zero padded). */
static void pack_k32(const Args32 *a, int64_t b, int64_t h, float *dst) {
    const float *src = a->k + b * a->ks[0] + h * a->ks[1];
    for (int64_t kb = 0; kb < a->mpad / 16; kb++) {
        for (int j = 0; j < 16; j++) {
            int64_t key = kb * 16 + j;
            const float *row = key < a->n ? src + key * a->ks[2] : NULL;
            for (int c = 0; c < HD; c++)
                dst[(kb * HD + c) * 16 + j] = row ? row[c] : 0.0f;
        }
    }
}

/* V of one head -> [key][dim], contiguous (rows past n zero). */
static void pack_v32(const Args32 *a, int64_t b, int64_t h, float *dst) {
    const float *src = a->v + b * a->vs[0] + h * a->vs[1];
    for (int64_t key = 0; key < a->mpad; key++) {
        if (key < a->n)
            memcpy(dst + key * HD, src + key * a->vs[2], sizeof(float) * HD);
        else
            memset(dst + key * HD, 0, sizeof(float) * HD);
    }
}

static void *pack_worker32(void *arg) {
    ParallelJob *job = (ParallelJob *)arg;
    Args32 *a = (Args32 *)job->args;
    int64_t heads = a->batch * a->kv_heads;
    for (int64_t t = job->id; t < heads; t += job->nthreads) {
        int64_t b = t / a->kv_heads, h = t % a->kv_heads;
        pack_k32(a, b, h, a->kpack + t * a->mpad * HD);
        pack_v32(a, b, h, a->vpack + t * a->mpad * HD);
    }
    return NULL;
}

/* Scores of ROWS query rows (pointers qr) against keys [0, mpad). */
static void scores32(const Args32 *a, const float *const *qr, const float *kp,
                     float *s) {
    for (int64_t kb = 0; kb < a->mpad; kb += KBLK) {
        __m512 acc[ROWS][2];
        for (int r = 0; r < ROWS; r++)
            acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        const float *k0 = kp + (kb / 16) * HD * 16;
        const float *k1 = k0 + HD * 16;
        for (int c = 0; c < HD; c++) {
            __m512 b0 = _mm512_loadu_ps(k0 + c * 16);
            __m512 b1 = _mm512_loadu_ps(k1 + c * 16);
            for (int r = 0; r < ROWS; r++) {
                __m512 q = _mm512_set1_ps(qr[r][c]);
                acc[r][0] = _mm512_fmadd_ps(q, b0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(q, b1, acc[r][1]);
            }
        }
        for (int r = 0; r < ROWS; r++) {
            _mm512_storeu_ps(s + r * a->mpad + kb, acc[r][0]);
            _mm512_storeu_ps(s + r * a->mpad + kb + 16, acc[r][1]);
        }
    }
}

/* out rows = P v for 4 rows of P (float32, mpad each; keys < n). */
static void pv4_32(const Args32 *a, const float *p, const float *v,
                   float *out) {
    __m512 acc[4][4];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
            acc[r][c] = _mm512_setzero_ps();
    for (int64_t j = 0; j < a->n; j++) {
        const float *vv = v + j * HD;
        __m512 v0 = _mm512_loadu_ps(vv);
        __m512 v1 = _mm512_loadu_ps(vv + 16);
        __m512 v2 = _mm512_loadu_ps(vv + 32);
        __m512 v3 = _mm512_loadu_ps(vv + 48);
        for (int r = 0; r < 4; r++) {
            __m512 w = _mm512_set1_ps(p[r * a->mpad + j]);
            acc[r][0] = _mm512_fmadd_ps(w, v0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(w, v1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(w, v2, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(w, v3, acc[r][3]);
        }
    }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
            _mm512_storeu_ps(out + r * HD + 16 * c, acc[r][c]);
}

static void *attend_worker32(void *arg) {
    ParallelJob *job = (ParallelJob *)arg;
    Args32 *a = (Args32 *)job->args;
    int64_t row_blocks = (a->n + ROWS - 1) / ROWS;
    int64_t tasks = a->batch * a->heads * row_blocks;
    int64_t per = (tasks + job->nthreads - 1) / job->nthreads;
    int64_t t0 = job->id * per, t1 = t0 + per < tasks ? t0 + per : tasks;
    float *s = aligned_alloc(64, sizeof(float) * ROWS * a->mpad);
    float out[ROWS * HD];
    float sums[ROWS];
    if (!s) {
        a->failed = 1;
        t1 = t0;
    }
    int64_t group = a->heads / a->kv_heads;
    for (int64_t t = t0; t < t1; t++) {
        int64_t b = t / (a->heads * row_blocks);
        int64_t h = (t / row_blocks) % a->heads;
        int64_t i0 = (t % row_blocks) * ROWS;
        int64_t kvh = h / group;
        const float *kp = a->kpack + (b * a->kv_heads + kvh) * a->mpad * HD;
        const float *v = a->vpack + (b * a->kv_heads + kvh) * a->mpad * HD;
        const float *qr[ROWS];
        for (int r = 0; r < ROWS; r++) { /* rows past n repeat the last */
            int64_t i = i0 + r < a->n ? i0 + r : a->n - 1;
            qr[r] = a->q + b * a->qs[0] + h * a->qs[1] + i * a->qs[2];
        }
        scores32(a, qr, kp, s);
        for (int r = 0; r < ROWS; r++)
            sums[r] = softmax_numerators(s + r * a->mpad, a->n, a->mpad,
                                         a->scale);
        pv4_32(a, s, v, out);
        pv4_32(a, s + 4 * a->mpad, v, out + 4 * HD);
        for (int r = 0; r < ROWS && i0 + r < a->n; r++) {
            float *dst = a->o + b * a->os[0] + h * a->os[1] +
                         (i0 + r) * a->os[2];
            __m512 inv = _mm512_set1_ps(1.0f / sums[r]);
            for (int c = 0; c < 4; c++)
                _mm512_storeu_ps(dst + 16 * c,
                                 _mm512_mul_ps(
                                     _mm512_loadu_ps(out + r * HD + 16 * c),
                                     inv));
        }
    }
    free(s);
    return NULL;
}

/* Returns 0 on success, -1 when memory or threads ran out. Tensors are
 * (batch, heads, n, 64) with any strides on dims 0-2 and a unit stride on
 * the last; k / v have kv_heads heads and n keys. */
int sapiens_attention_f32(const float *q, const float *k, const float *v,
                          float *o, int64_t batch, int64_t heads,
                          int64_t kv_heads, int64_t n, const int64_t *qs,
                          const int64_t *ks, const int64_t *vs,
                          const int64_t *os, float scale, int nthreads) {
    Args32 a;
    memset(&a, 0, sizeof(a));
    a.q = q, a.k = k, a.v = v, a.o = o;
    a.batch = batch, a.heads = heads, a.kv_heads = kv_heads, a.n = n;
    for (int i = 0; i < 3; i++) {
        a.qs[i] = qs[i], a.ks[i] = ks[i], a.vs[i] = vs[i], a.os[i] = os[i];
    }
    a.scale = scale;
    a.mpad = (n + KBLK - 1) / KBLK * KBLK;
    size_t bytes = sizeof(float) * batch * kv_heads * a.mpad * HD;
    a.kpack = aligned_alloc(64, (bytes + 63) / 64 * 64);
    a.vpack = aligned_alloc(64, (bytes + 63) / 64 * 64);
    int rc = -1;
    if (a.kpack && a.vpack && run_parallel(pack_worker32, &a, nthreads) == 0)
        rc = run_parallel(attend_worker32, &a, nthreads) == 0 && !a.failed
                 ? 0
                 : -1;
    free(a.kpack);
    free(a.vpack);
    return rc;
}
