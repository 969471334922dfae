// The CPU engine's hot loops: x^T y and the plane rotation, plain and with AVX2 / AVX-512.
//
// Not a standalone header: included by jacobi_cpu_solver.h, inside the instruction-set
// namespace that jacobi_cpu.cpp opens (see there).

// ---------------------------------------------------------------------------
// Kernels: x^T y and the plane rotation.

// Dot products accumulate in double: for float32 columns the orthogonality
// test then sees the true inner product of the stored columns.
template <typename T>
inline double dot(const T* __restrict x, const T* __restrict y, int64_t n) {
  // Four partial sums: vectorisable and a shorter error chain than one sum.
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += double(x[i]) * double(y[i]);
    s1 += double(x[i + 1]) * double(y[i + 1]);
    s2 += double(x[i + 2]) * double(y[i + 2]);
    s3 += double(x[i + 3]) * double(y[i + 3]);
  }
  for (; i < n; ++i) s0 += double(x[i]) * double(y[i]);
  return (s0 + s1) + (s2 + s3);
}

// Plane rotation [x y] <- [x y] [[c, s], [-s, c]], i.e. x' = c x - s y,
// y' = s x + c y, applied in Rutishauser's update form
//   x' = x - s (y + tau x),   y' = y + s (x - tau y),   tau = s / (1 + c),
// which is the same rotation in exact arithmetic but never uses c. c is close
// to 1 and its rounding alone makes each rotation non-orthogonal by ~eps;
// accumulated over all rotations that dominated the loss of orthogonality of
// V. Measured with this engine on random 256x256 matrices, ||V^T V - I||_F
// went from 3806 to 243 eps in float64 and from 476 to 212 eps in float32
// (U is set by the stopping test and did not change; more in the commit
// message). Same two FMAs per element, but both FMAs of an output now depend
// on both inputs: the kernel is ~6-19% slower on Zen 4 (short columns most).
// Callers pass s and tau (computed in double from tan; rounded to T here).
template <typename T>
inline void rotate(T* __restrict x, T* __restrict y, int64_t n, double s, double tau) {
  const T ss = static_cast<T>(s), tt = static_cast<T>(tau);
  for (int64_t i = 0; i < n; ++i) {
    const T xi = x[i], yi = y[i];
    x[i] = xi - ss * (yi + tt * xi);
    y[i] = yi + ss * (xi - tt * yi);
  }
}

#ifdef JSVD_SOLVER_AVX2
inline double hsum(__m256d v) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

template <>
inline double dot<double>(const double* __restrict x, const double* __restrict y, int64_t n) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 = _mm256_fmadd_pd(_mm256_loadu_pd(x + i), _mm256_loadu_pd(y + i), s0);
    s1 = _mm256_fmadd_pd(_mm256_loadu_pd(x + i + 4), _mm256_loadu_pd(y + i + 4), s1);
  }
  if (i + 4 <= n) {
    s0 = _mm256_fmadd_pd(_mm256_loadu_pd(x + i), _mm256_loadu_pd(y + i), s0);
    i += 4;
  }
  double r = hsum(_mm256_add_pd(s0, s1));
  for (; i < n; ++i) r += x[i] * y[i];
  return r;
}

// float32 columns. Widening every element to double costs more than the
// products (two converts per four FMAs), so products are accumulated in
// float32 lanes for a short chunk (4 per lane) and the lane sums are then
// widened and added in double. Each lane's chunk error is at most about
// 2 eps_f sum|x_i y_i| <= 2 eps_f ||x|| ||y||, below the orthogonality
// threshold sqrt(p) eps_f ||x|| ||y|| for p >= 16; shorter columns use the
// exact double path (products of floats are exact in double).
template <>
inline double dot<float>(const float* __restrict x, const float* __restrict y, int64_t n) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t i = 0;
  if (n >= 16) {
    for (; i + 32 <= n; i += 32) {
      __m256 f = _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i));
      f = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), f);
      f = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), f);
      f = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), f);
      s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
      s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i), yv = _mm256_loadu_ps(y + i);
    s0 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(xv)), _mm256_cvtps_pd(_mm256_castps256_ps128(yv)), s0);
    s1 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1)), _mm256_cvtps_pd(_mm256_extractf128_ps(yv, 1)),
                         s1);
  }
  if (i + 4 <= n) {
    s0 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), _mm256_cvtps_pd(_mm_loadu_ps(y + i)), s0);
    i += 4;
  }
  double r = hsum(_mm256_add_pd(s0, s1));
  for (; i < n; ++i) r += double(x[i]) * double(y[i]);
  return r;
}

template <>
inline void rotate<double>(double* __restrict x, double* __restrict y, int64_t n, double s, double tau) {
  const __m256d sv = _mm256_set1_pd(s), tv = _mm256_set1_pd(tau);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d xv = _mm256_loadu_pd(x + i), yv = _mm256_loadu_pd(y + i);
    _mm256_storeu_pd(x + i, _mm256_fnmadd_pd(sv, _mm256_fmadd_pd(tv, xv, yv), xv));
    _mm256_storeu_pd(y + i, _mm256_fmadd_pd(sv, _mm256_fnmadd_pd(tv, yv, xv), yv));
  }
  for (; i < n; ++i) {
    const double xi = x[i], yi = y[i];
    x[i] = xi - s * (yi + tau * xi);
    y[i] = yi + s * (xi - tau * yi);
  }
}

template <>
inline void rotate<float>(float* __restrict x, float* __restrict y, int64_t n, double s, double tau) {
  const float sf = static_cast<float>(s), tf = static_cast<float>(tau);
  const __m256 sv = _mm256_set1_ps(sf), tv = _mm256_set1_ps(tf);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i), yv = _mm256_loadu_ps(y + i);
    _mm256_storeu_ps(x + i, _mm256_fnmadd_ps(sv, _mm256_fmadd_ps(tv, xv, yv), xv));
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(sv, _mm256_fnmadd_ps(tv, yv, xv), yv));
  }
  for (; i < n; ++i) {
    const float xi = x[i], yi = y[i];
    x[i] = xi - sf * (yi + tf * xi);
    y[i] = yi + sf * (xi - tf * yi);
  }
}
#endif  // JSVD_SOLVER_AVX2

#ifdef JSVD_SOLVER_AVX512
// AVX-512 variants for columns of at least one full vector; shorter columns
// keep the AVX2 kernels above (they are called through these).
inline double dot512(const double* __restrict x, const double* __restrict y, int64_t n) {
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm512_fmadd_pd(_mm512_loadu_pd(x + i), _mm512_loadu_pd(y + i), s0);
    s1 = _mm512_fmadd_pd(_mm512_loadu_pd(x + i + 8), _mm512_loadu_pd(y + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm512_fmadd_pd(_mm512_loadu_pd(x + i), _mm512_loadu_pd(y + i), s0);
  double r = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
  for (; i < n; ++i) r += x[i] * y[i];
  return r;
}
inline double dot512(const float* __restrict x, const float* __restrict y, int64_t n) {
  // as dot<float>: float lanes for 4 products each, then double
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 f = _mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i));
    f = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), f);
    f = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), f);
    f = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), f);
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(f)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1))));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) + dot<float>(x + i, y + i, n - i);
}
template <typename T>
inline void rotate512(T* __restrict x, T* __restrict y, int64_t n, double s, double tau);
template <>
inline void rotate512<double>(double* __restrict x, double* __restrict y, int64_t n, double s, double tau) {
  const __m512d sv = _mm512_set1_pd(s), tv = _mm512_set1_pd(tau);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d xv = _mm512_loadu_pd(x + i), yv = _mm512_loadu_pd(y + i);
    _mm512_storeu_pd(x + i, _mm512_fnmadd_pd(sv, _mm512_fmadd_pd(tv, xv, yv), xv));
    _mm512_storeu_pd(y + i, _mm512_fmadd_pd(sv, _mm512_fnmadd_pd(tv, yv, xv), yv));
  }
  if (i < n) rotate<double>(x + i, y + i, n - i, s, tau);
}
template <>
inline void rotate512<float>(float* __restrict x, float* __restrict y, int64_t n, double s, double tau) {
  const __m512 sv = _mm512_set1_ps(static_cast<float>(s)), tv = _mm512_set1_ps(static_cast<float>(tau));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i), yv = _mm512_loadu_ps(y + i);
    _mm512_storeu_ps(x + i, _mm512_fnmadd_ps(sv, _mm512_fmadd_ps(tv, xv, yv), xv));
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(sv, _mm512_fnmadd_ps(tv, yv, xv), yv));
  }
  if (i < n) rotate<float>(x + i, y + i, n - i, s, tau);
}
#define JSVD_DOT dot512
#define JSVD_ROTATE rotate512
#else
#define JSVD_DOT dot
#define JSVD_ROTATE rotate
#endif  // JSVD_SOLVER_AVX512

// Rotation of (x, y) fused with the dot products x'^T z1 and y'^T z2 of the
// rotated columns with the columns they meet in the next step (z = nullptr:
// not wanted). Computing them while x', y' are in registers saves reloading
// both columns for the next step's dot product; the values are the dot
// products of the stored columns, as a separate dot() would give.
#ifdef JSVD_SOLVER_AVX512
template <bool Z1, bool Z2>
inline void rotate_fused512(double* __restrict x, double* __restrict y, int64_t n, double s, double tau,
                            const double* __restrict z1, const double* __restrict z2, double* g1, double* g2) {
  const __m512d sv = _mm512_set1_pd(s), tv = _mm512_set1_pd(tau);
  __m512d a1 = _mm512_setzero_pd(), a2 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d xv = _mm512_loadu_pd(x + i), yv = _mm512_loadu_pd(y + i);
    const __m512d xn = _mm512_fnmadd_pd(sv, _mm512_fmadd_pd(tv, xv, yv), xv);
    const __m512d yn = _mm512_fmadd_pd(sv, _mm512_fnmadd_pd(tv, yv, xv), yv);
    _mm512_storeu_pd(x + i, xn);
    _mm512_storeu_pd(y + i, yn);
    if (Z1) a1 = _mm512_fmadd_pd(xn, _mm512_loadu_pd(z1 + i), a1);
    if (Z2) a2 = _mm512_fmadd_pd(yn, _mm512_loadu_pd(z2 + i), a2);
  }
  double r1 = Z1 ? _mm512_reduce_add_pd(a1) : 0.0, r2 = Z2 ? _mm512_reduce_add_pd(a2) : 0.0;
  for (; i < n; ++i) {
    const double xi = x[i], yi = y[i];
    x[i] = xi - s * (yi + tau * xi);
    y[i] = yi + s * (xi - tau * yi);
    if (Z1) r1 += x[i] * z1[i];
    if (Z2) r2 += y[i] * z2[i];
  }
  if (Z1) *g1 = r1;
  if (Z2) *g2 = r2;
}
// float32: products summed in float lanes for 4 vectors, then in double (as dot512)
template <bool Z1, bool Z2>
inline void rotate_fused512(float* __restrict x, float* __restrict y, int64_t n, double s, double tau,
                            const float* __restrict z1, const float* __restrict z2, double* g1, double* g2) {
  const float sf = static_cast<float>(s), tf = static_cast<float>(tau);
  const __m512 sv = _mm512_set1_ps(sf), tv = _mm512_set1_ps(tf);
  __m512d a1 = _mm512_setzero_pd(), a2 = _mm512_setzero_pd();
  auto widen_add = [](__m512d acc, __m512 f) {
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(f)));
    return _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1))));
  };
  int64_t i = 0;
  while (i + 16 <= n) {
    __m512 f1 = _mm512_setzero_ps(), f2 = _mm512_setzero_ps();
    for (int r = 0; r < 4 && i + 16 <= n; ++r, i += 16) {
      const __m512 xv = _mm512_loadu_ps(x + i), yv = _mm512_loadu_ps(y + i);
      const __m512 xn = _mm512_fnmadd_ps(sv, _mm512_fmadd_ps(tv, xv, yv), xv);
      const __m512 yn = _mm512_fmadd_ps(sv, _mm512_fnmadd_ps(tv, yv, xv), yv);
      _mm512_storeu_ps(x + i, xn);
      _mm512_storeu_ps(y + i, yn);
      if (Z1) f1 = _mm512_fmadd_ps(xn, _mm512_loadu_ps(z1 + i), f1);
      if (Z2) f2 = _mm512_fmadd_ps(yn, _mm512_loadu_ps(z2 + i), f2);
    }
    if (Z1) a1 = widen_add(a1, f1);
    if (Z2) a2 = widen_add(a2, f2);
  }
  double r1 = Z1 ? _mm512_reduce_add_pd(a1) : 0.0, r2 = Z2 ? _mm512_reduce_add_pd(a2) : 0.0;
  for (; i < n; ++i) {
    const float xi = x[i], yi = y[i];
    x[i] = xi - sf * (yi + tf * xi);
    y[i] = yi + sf * (xi - tf * yi);
    if (Z1) r1 += double(x[i]) * double(z1[i]);
    if (Z2) r2 += double(y[i]) * double(z2[i]);
  }
  if (Z1) *g1 = r1;
  if (Z2) *g2 = r2;
}
#endif

template <typename T>
inline void rotate_fused(T* x, T* y, int64_t n, double s, double tau, const T* z1, const T* z2, double* g1,
                         double* g2) {
#ifdef JSVD_SOLVER_AVX512
  if (z1 && z2) return rotate_fused512<true, true>(x, y, n, s, tau, z1, z2, g1, g2);
  if (z1) return rotate_fused512<true, false>(x, y, n, s, tau, z1, z2, g1, g2);
  if (z2) return rotate_fused512<false, true>(x, y, n, s, tau, z1, z2, g1, g2);
  return rotate512<T>(x, y, n, s, tau);
#else
  rotate(x, y, n, s, tau);
  if (z1) *g1 = dot(x, z1, n);
  if (z2) *g2 = dot(y, z2, n);
#endif
}

