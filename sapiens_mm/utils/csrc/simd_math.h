/*
 * Vector math shared by the CPU kernels (AVX-512F).
 */
#ifndef SAPIENS_MM_SIMD_MATH_H
#define SAPIENS_MM_SIMD_MATH_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

/* 2^x for x in [-127, 0]: Cody-Waite split and a degree-6 polynomial
 * (relative error below 2e-7, far under bf16's 4e-3). */
static inline __m512 exp2_ps(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-127.0f));
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT |
                                           _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, n); /* [-0.5, 0.5] */
    __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}


/* Softmax numerators of one row of attention scores, in place:
 * s[j] = 2^((s[j] - max) * scale * log2(e)) for j < n, 0 for n <= j < npad
 * (npad a multiple of 16, s padded to it). Returns their sum. */
static inline float softmax_numerators(float *s, int64_t n, int64_t npad,
                                       float scale) {
    const float c = scale * 1.4426950408889634f; /* to base 2 */
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        mx = _mm512_max_ps(mx, _mm512_loadu_ps(s + j));
    float m = _mm512_reduce_max_ps(mx);
    for (; j < n; j++)
        m = s[j] > m ? s[j] : m;
    __m512 vc = _mm512_set1_ps(c), vm = _mm512_set1_ps(m * c);
    __m512 sum = _mm512_setzero_ps();
    for (j = 0; j < npad; j += 16) {
        __mmask16 live = n - j >= 16 ? 0xffff
                         : n > j     ? (__mmask16)((1u << (n - j)) - 1)
                                     : 0;
        __m512 e = exp2_ps(_mm512_fmsub_ps(_mm512_loadu_ps(s + j), vc, vm));
        e = _mm512_maskz_mov_ps(live, e);
        sum = _mm512_add_ps(sum, e);
        _mm512_storeu_ps(s + j, e);
    }
    return _mm512_reduce_add_ps(sum);
}

#endif
