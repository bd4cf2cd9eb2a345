/*
 * Exact (non-causal, unmasked) scaled dot-product attention for bf16 or
 * float32 tensors with head size 64 on x86 CPUs with AVX-512 (bf16:
 * AVX512_BF16).
 *
 * out = softmax(q k^T * scale) v per (batch, head); query head h reads K/V
 * head h / (heads / kv_heads) (grouped-query attention).
 *
 * K and V of each K/V head are first repacked into the layouts the inner
 * loops read (bf16: the pair-interleaved layouts of VDPBF16PS; float32: K
 * transposed into blocks of 16 keys, V as contiguous rows). Each task then
 * takes 8 query rows, computes their scores against all keys into a
 * float32 row buffer (kept in L1 / L2), the exact softmax in float32, and
 * accumulates P v in float32 before one division per output row. bf16:
 * both products on VDPBF16PS (bf16 pairs, float32 accumulation), the
 * probabilities rounded to bf16 before the second product as PyTorch's CPU
 * flash kernel does; float32: FMAs, the probabilities kept in float32.
 *
 * Plain C on PyTorch's OpenMP threads (parallel.h), no PyTorch headers: it
 * builds in about a second and is called through ctypes (which releases
 * the GIL).
 */
#include <immintrin.h>
#include <math.h>
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
    const void *q, *k, *v;
    void *o;
    int64_t batch, heads, kv_heads, n;
    int64_t qs[3], ks[3], vs[3], os[3]; /* strides of dims 0-2, elements */
    float scale;
    int64_t mpad;        /* keys rounded up to KBLK */
    size_t es;           /* element size: 2 (bf16) or 4 (float32) */
    void *kpack, *vpack; /* mpad * HD elements per K/V head */
    volatile int failed; /* a worker could not allocate its buffers */
} Args;

/* Row i of head h of batch b of a (batch, heads, n, 64) tensor. */
static inline const void *row_of(const Args *a, const void *base,
                                 const int64_t *st, int64_t b, int64_t h,
                                 int64_t i) {
    return (const char *)base + a->es * (b * st[0] + h * st[1] + i * st[2]);
}

static inline __m512bh as_bh(__m512i x) { return (__m512bh)x; }

/* bf16 K of one head -> [key block of 16][pair][16 keys][2] (zero padded). */
static void pack_k_bf16(const Args *a, int64_t b, int64_t h, bf16 *dst) {
    for (int64_t kb = 0; kb < a->mpad / 16; kb++) {
        for (int p = 0; p < PAIRS; p++) {
            uint32_t *d = (uint32_t *)(dst + ((kb * PAIRS + p) * 16) * 2);
            for (int j = 0; j < 16; j++) {
                int64_t key = kb * 16 + j;
                d[j] = key < a->n ? ((const uint32_t *)row_of(
                                        a, a->k, a->ks, b, h, key))[p]
                                  : 0u;
            }
        }
    }
}

/* bf16 V of one head -> [key pair][64 dims][2] (zero padded). */
static void pack_v_bf16(const Args *a, int64_t b, int64_t h, bf16 *dst) {
    for (int64_t jp = 0; jp < a->mpad / 2; jp++) {
        int64_t j0 = 2 * jp, j1 = 2 * jp + 1;
        const bf16 *r0 =
            j0 < a->n ? (const bf16 *)row_of(a, a->v, a->vs, b, h, j0) : NULL;
        const bf16 *r1 =
            j1 < a->n ? (const bf16 *)row_of(a, a->v, a->vs, b, h, j1) : NULL;
        bf16 *d = dst + jp * HD * 2;
        for (int c = 0; c < HD; c++) {
            d[2 * c] = r0 ? r0[c] : 0;
            d[2 * c + 1] = r1 ? r1[c] : 0;
        }
    }
}

/* float32 K of one head -> [key block of 16][dim][16 keys] (zero padded). */
static void pack_k_f32(const Args *a, int64_t b, int64_t h, float *dst) {
    for (int64_t kb = 0; kb < a->mpad / 16; kb++) {
        for (int j = 0; j < 16; j++) {
            int64_t key = kb * 16 + j;
            const float *row =
                key < a->n ? (const float *)row_of(a, a->k, a->ks, b, h, key)
                           : NULL;
            for (int c = 0; c < HD; c++)
                dst[(kb * HD + c) * 16 + j] = row ? row[c] : 0.0f;
        }
    }
}

/* float32 V of one head -> [key][dim], contiguous (rows past n zero). */
static void pack_v_f32(const Args *a, int64_t b, int64_t h, float *dst) {
    for (int64_t key = 0; key < a->mpad; key++) {
        if (key < a->n)
            memcpy(dst + key * HD, row_of(a, a->v, a->vs, b, h, key),
                   sizeof(float) * HD);
        else
            memset(dst + key * HD, 0, sizeof(float) * HD);
    }
}

static void *pack_worker(void *arg) {
    ParallelJob *job = (ParallelJob *)arg;
    Args *a = (Args *)job->args;
    for (int64_t t = job->id; t < a->batch * a->kv_heads; t += job->nthreads) {
        int64_t b = t / a->kv_heads, h = t % a->kv_heads;
        size_t offset = a->es * t * a->mpad * HD;
        char *kd = (char *)a->kpack + offset, *vd = (char *)a->vpack + offset;
        if (a->es == 2) {
            pack_k_bf16(a, b, h, (bf16 *)kd);
            pack_v_bf16(a, b, h, (bf16 *)vd);
        } else {
            pack_k_f32(a, b, h, (float *)kd);
            pack_v_f32(a, b, h, (float *)vd);
        }
    }
    return NULL;
}

/* Scores of ROWS bf16 query rows against keys [0, mpad). */
static void scores_bf16(const Args *a, const void *const *qr, const bf16 *kp,
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

/* Scores of ROWS float32 query rows against keys [0, mpad). */
static void scores_f32(const Args *a, const void *const *qr, const float *kp,
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
                __m512 q = _mm512_set1_ps(((const float *)qr[r])[c]);
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

/* out rows = P v for 4 rows of bf16 P (mpad each). */
static void pv4_bf16(const Args *a, const bf16 *p, const bf16 *vp,
                     float *out) {
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

/* out rows = P v for 4 rows of float32 P (mpad each; keys < n). */
static void pv4_f32(const Args *a, const float *p, const float *v,
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

/* Softmax, P v and the output rows of ROWS query rows whose scores are in s
 * (overwritten); p: a bf16 buffer of ROWS * mpad for the bf16 kernel. */
static void finish_rows(const Args *a, float *s, bf16 *p, const void *kvp,
                        int64_t b, int64_t h, int64_t i0) {
    float out[ROWS * HD];
    float sums[ROWS];
    for (int r = 0; r < ROWS; r++) {
        float *sr = s + r * a->mpad;
        sums[r] = softmax_numerators(sr, a->n, a->mpad, a->scale);
        if (a->es == 2) /* probabilities rounded to bf16 */
            for (int64_t j = 0; j < a->mpad; j += 16)
                _mm256_storeu_si256(
                    (__m256i *)(p + r * a->mpad + j),
                    (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(sr + j)));
    }
    for (int half = 0; half < 2; half++) {
        int64_t off = 4 * half * a->mpad;
        if (a->es == 2)
            pv4_bf16(a, p + off, (const bf16 *)kvp, out + 4 * half * HD);
        else
            pv4_f32(a, s + off, (const float *)kvp, out + 4 * half * HD);
    }
    for (int r = 0; r < ROWS && i0 + r < a->n; r++) {
        void *dst = (void *)row_of(a, a->o, a->os, b, h, i0 + r);
        __m512 inv = _mm512_set1_ps(1.0f / sums[r]);
        for (int c = 0; c < 4; c++) {
            __m512 y = _mm512_mul_ps(_mm512_loadu_ps(out + r * HD + 16 * c),
                                     inv);
            if (a->es == 2)
                _mm256_storeu_si256((__m256i *)((bf16 *)dst + 16 * c),
                                    (__m256i)_mm512_cvtneps_pbh(y));
            else
                _mm512_storeu_ps((float *)dst + 16 * c, y);
        }
    }
}

static void *attend_worker(void *arg) {
    ParallelJob *job = (ParallelJob *)arg;
    Args *a = (Args *)job->args;
    int64_t row_blocks = (a->n + ROWS - 1) / ROWS;
    int64_t tasks = a->batch * a->heads * row_blocks;
    int64_t per = (tasks + job->nthreads - 1) / job->nthreads;
    int64_t t0 = job->id * per, t1 = t0 + per < tasks ? t0 + per : tasks;
    float *s = aligned_alloc(64, sizeof(float) * ROWS * a->mpad);
    bf16 *p = a->es == 2 ? aligned_alloc(64, sizeof(bf16) * ROWS * a->mpad)
                         : NULL;
    if (!s || (a->es == 2 && !p)) {
        a->failed = 1;
        t1 = t0;
    }
    int64_t group = a->heads / a->kv_heads;
    for (int64_t t = t0; t < t1; t++) {
        int64_t b = t / (a->heads * row_blocks);
        int64_t h = (t / row_blocks) % a->heads;
        int64_t i0 = (t % row_blocks) * ROWS;
        size_t offset = a->es * (b * a->kv_heads + h / group) * a->mpad * HD;
        const char *kp = (const char *)a->kpack + offset;
        const char *vp = (const char *)a->vpack + offset;
        const void *qr[ROWS];
        for (int r = 0; r < ROWS; r++) /* rows past n repeat the last */
            qr[r] = row_of(a, a->q, a->qs, b, h,
                           i0 + r < a->n ? i0 + r : a->n - 1);
        if (a->es == 2)
            scores_bf16(a, qr, (const bf16 *)kp, s);
        else
            scores_f32(a, qr, (const float *)kp, s);
        finish_rows(a, s, p, vp, b, h, i0);
    }
    free(s);
    free(p);
    return NULL;
}

static int attention(const void *q, const void *k, const void *v, void *o,
                     size_t es, int64_t batch, int64_t heads,
                     int64_t kv_heads, int64_t n, const int64_t *qs,
                     const int64_t *ks, const int64_t *vs, const int64_t *os,
                     float scale, int nthreads) {
    Args a;
    memset(&a, 0, sizeof(a));
    a.q = q, a.k = k, a.v = v, a.o = o, a.es = es;
    a.batch = batch, a.heads = heads, a.kv_heads = kv_heads, a.n = n;
    for (int i = 0; i < 3; i++) {
        a.qs[i] = qs[i], a.ks[i] = ks[i], a.vs[i] = vs[i], a.os[i] = os[i];
    }
    a.scale = scale;
    a.mpad = (n + KBLK - 1) / KBLK * KBLK;
    size_t bytes = es * batch * kv_heads * a.mpad * HD;
    a.kpack = aligned_alloc(64, (bytes + 63) / 64 * 64);
    a.vpack = aligned_alloc(64, (bytes + 63) / 64 * 64);
    int rc = -1;
    nthreads = nthreads < 1 ? 1 : nthreads;
    if (a.kpack && a.vpack) {
        run_parallel(pack_worker, &a, nthreads, nthreads);
        run_parallel(attend_worker, &a, nthreads, nthreads);
        rc = a.failed ? -1 : 0;
    }
    free(a.kpack);
    free(a.vpack);
    return rc;
}

/* Both return 0 on success, -1 when memory ran out. Tensors are
 * (batch, heads, n, 64) with any strides on dims 0-2 and a unit stride on
 * the last; k / v have kv_heads heads and n keys. */
int sapiens_attention_bf16(const bf16 *q, const bf16 *k, const bf16 *v,
                           bf16 *o, int64_t batch, int64_t heads,
                           int64_t kv_heads, int64_t n, const int64_t *qs,
                           const int64_t *ks, const int64_t *vs,
                           const int64_t *os, float scale, int nthreads) {
    return attention(q, k, v, o, sizeof(bf16), batch, heads, kv_heads, n, qs,
                     ks, vs, os, scale, nthreads);
}

int sapiens_attention_f32(const float *q, const float *k, const float *v,
                          float *o, int64_t batch, int64_t heads,
                          int64_t kv_heads, int64_t n, const int64_t *qs,
                          const int64_t *ks, const int64_t *vs,
                          const int64_t *os, float scale, int nthreads) {
    return attention(q, k, v, o, sizeof(float), batch, heads, kv_heads, n, qs,
                     ks, vs, os, scale, nthreads);
}
