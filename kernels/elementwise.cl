// SPDX-License-Identifier: Apache-2.0
// Elementwise kernels: unary math, numpy-broadcasting binary ops and the activation gradients.
// Each work-item strides through the elements (FOR_EACH, kernels/prelude.cl). Inputs and
// output may be the same buffer (in-place ops): each work-item reads an element before writing
// it, and no pointer is restrict.

// NaN semantics (as the CPU's, src/compiler/ops/elementwise.cpp): comparisons are written so
// that a NaN input gives a NaN result; OpenCL's fmax/fmin would drop it.
// float32 rounded to float16's and bfloat16's values, halves to even (as src/common/float16.hpp).
float round_to_float16(float x) {
  const uint u = as_uint(x), a = u & 0x7fffffffu, sign = u & 0x80000000u;
  if (a >= 0x7f800000u) return x;
  if (a < 0x38800000u) return rint(x * 16777216.0f) * (1.0f / 16777216.0f);
  uint r = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
  if (r > 0x477fe000u) r = 0x7f800000u;
  return as_float(r | sign);
}
float round_to_bfloat16(float x) {
  const uint u = as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;
  return as_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}

#define UNARY(name, expr)                                                                    \
  kernel void name(global const float* x, global float* y, const int n, const float alpha,   \
                   const float beta) {                                                       \
    FOR_EACH(i, n) {                                                                         \
      const float v = x[i];                                                                  \
      y[i] = (expr);                                                                         \
    }                                                                                        \
  }

// tanh_f32's tanh, for gelu_tanh_f32.
inline float gelu_tanh_t(float u) {
  return fabs(u) >= 10.0f ? copysign(1.0f, u) : tanh(u);
}

// The op expressions are not declarations: keep their spacing.
// clang-format off
UNARY(neg_f32, -v)
UNARY(scale_f32, alpha * v)
UNARY(exp_f32, exp(v))
UNARY(log_f32, log(v))
UNARY(sqrt_f32, sqrt(v))
UNARY(floor_f32, floor(v))
UNARY(relu_f32, v <= 0.0f ? 0.0f : v)
UNARY(sigmoid_f32, 1.0f / (1.0f + exp(-v)))
// Some libms (PoCL's) stop one ulp short of +-1 for large |x|; tanh is exactly +-1 in float
// from |x| = 10 on.
UNARY(tanh_f32, fabs(v) >= 10.0f ? copysign(1.0f, v) : tanh(v))
UNARY(gelu_f32, 0.5f * v * (1.0f + erf(v * M_SQRT1_2_F)))
UNARY(abs_f32, fabs(v))
UNARY(erf_f32, erf(v))
UNARY(sin_f32, sin(v))
UNARY(cos_f32, cos(v))
UNARY(tan_f32, tan(v))
UNARY(asin_f32, asin(v))
UNARY(acos_f32, acos(v))
UNARY(atan_f32, atan(v))
UNARY(sinh_f32, sinh(v))
UNARY(cosh_f32, cosh(v))
UNARY(asinh_f32, asinh(v))
UNARY(acosh_f32, acosh(v))
UNARY(atanh_f32, atanh(v))
// rint in the default rounding mode: halves to even, as the CPU's nearbyint
UNARY(round_f32, rint(v))
UNARY(to_float16_f32, round_to_float16(v))
UNARY(to_bfloat16_f32, round_to_bfloat16(v))
UNARY(leaky_relu_f32, v > 0.0f ? v : alpha * v)
// min(max(x, lo), hi) with lo = alpha, hi = beta: lo > hi gives hi
UNARY(clip_f32, (v < alpha ? alpha : v) > beta ? beta : (v < alpha ? alpha : v))
UNARY(softsign_f32, v / (1.0f + fabs(v)))
UNARY(mish_f32, v * tanh(v > 20.0f ? v : log1p(exp(v))))
// GELU's tanh form (x^3 in float: OpenCL devices need not have double), tanh as tanh_f32's.
UNARY(gelu_tanh_f32, v * 0.5f * (gelu_tanh_t((v + v * v * v * 0.044715f) * 0.7978845608028654f) + 1.0f))
UNARY(silu_f32, v * (1.0f / (1.0f + exp(-v))))
UNARY(hard_swish_f32, v * fmin(fmax((1.0f / 6.0f) * v + 0.5f, 0.0f), 1.0f))
// clang-format on

// Binary ops in two forms: _ff for two full operands of the output's shape (contiguous), _bc
// for broadcasting through a collapsed stride plan of up to 8 dims (d: output dims, sa/sb:
// element strides of the operands, 0 along broadcast dims; leading unused dims are 1).
// The pair of kernels FF and BC with T operands and a TO result.
#define BINARY_PAIR(FF, BC, T, TO, expr)                                                      \
  kernel void FF(global const T* A, global const T* B, global TO* out, const int n,          \
                 const float alpha, const float beta) {                                      \
    FOR_EACH(i, n) {                                                                         \
      const T a = A[i], b = B[i];                                                            \
      out[i] = (expr);                                                                       \
    }                                                                                        \
  }                                                                                          \
  kernel void BC(global const T* A, global const T* B, global TO* out, const int n,          \
                 const int8 d, const int8 sa, const int8 sb, const float alpha,              \
                 const float beta) {                                                         \
    FOR_EACH(i, n) {                                                                         \
      const int2 o = offset8x2((int)i, d, sa, sb);                                           \
      const T a = A[o.x], b = B[o.y];                                                        \
      out[i] = (expr);                                                                       \
    }                                                                                        \
  }
// Float ops: name_ff and name_bc.
#define BINARY(name, expr) BINARY_PAIR(name##_ff, name##_bc, float, float, expr)

// clang-format off
BINARY(add, a + b)
BINARY(sub, a - b)
BINARY(mul, a * b)
BINARY(div, a / b)
BINARY(axpby, alpha * a + beta * b)
// Activation gradients: a is the incoming gradient, b the forward input (relu) or output.
BINARY(relu_grad, b <= 0.0f ? 0.0f : a)
BINARY(sigmoid_grad, a * b * (1.0f - b))
BINARY(tanh_grad, a * (1.0f - b * b))
BINARY(gelu_grad, a * (0.5f * (1.0f + erf(b * M_SQRT1_2_F)) + b * 0.3989422804014327f * exp(-0.5f * b * b)))
BINARY(abs_grad, b > 0.0f ? a : (b < 0.0f ? -a : b * 0.0f))
BINARY(erf_grad, a * 1.12837916709551257f * exp(-b * b))
BINARY(leaky_relu_grad, b <= 0.0f ? alpha * a : a)
BINARY(clip_grad, b < alpha || b > beta ? 0.0f : a)
BINARY(pow, pow(a, b))
BINARY(xlogy, a == 0.0f ? 0.0f : a * log(b))
BINARY(prelu, a < 0.0f ? b * a : a)
// a wins ties and NaNs (the result is NaN where either input is)
BINARY(maximum, a >= b || isnan(a) ? a : b)
BINARY(minimum, a <= b || isnan(a) ? a : b)
// remainders: fmod's has a's sign, mod's b's (graph.hpp)
BINARY(fmod, fmod(a, b))
BINARY(mod, fmod(a, b) != 0.0f && (fmod(a, b) < 0.0f) != (b < 0.0f) ? fmod(a, b) + b : fmod(a, b))
// clang-format on

// Binary ops of typed operands, in the binary ops' two forms: kernels name_T_ff and name_T_bc
// with T operands and a TO result. Comparisons and logic give int 0 / 1 (a scalar comparison
// is 1 or 0 in OpenCL C; a NaN compares false, as on the CPU); arithmetic, maximum and
// minimum of ints give ints.
#define TYPED_BINARY(name, T, TO, expr) \
  BINARY_PAIR(name##_##T##_ff, name##_##T##_bc, T, TO, expr)

// clang-format off
TYPED_BINARY(equal, float, int, a == b)
TYPED_BINARY(equal, int, int, a == b)
TYPED_BINARY(less, float, int, a < b)
TYPED_BINARY(less, int, int, a < b)
TYPED_BINARY(less_equal, float, int, a <= b)
TYPED_BINARY(less_equal, int, int, a <= b)
TYPED_BINARY(greater, float, int, a > b)
TYPED_BINARY(greater, int, int, a > b)
TYPED_BINARY(greater_equal, float, int, a >= b)
TYPED_BINARY(greater_equal, int, int, a >= b)
TYPED_BINARY(logical_and, int, int, a != 0 && b != 0)
TYPED_BINARY(logical_or, int, int, a != 0 || b != 0)
TYPED_BINARY(logical_xor, int, int, (a != 0) != (b != 0))
// int arithmetic wraps around (two's complement), as on the CPU
TYPED_BINARY(add, int, int, as_int(as_uint(a) + as_uint(b)))
TYPED_BINARY(sub, int, int, as_int(as_uint(a) - as_uint(b)))
TYPED_BINARY(mul, int, int, as_int(as_uint(a) * as_uint(b)))
TYPED_BINARY(maximum, int, int, a >= b ? a : b)
TYPED_BINARY(minimum, int, int, a <= b ? a : b)
// an int divisor of 0 or -1 gives 0, as on the CPU (INT_MIN % -1 would overflow)
TYPED_BINARY(fmod, int, int, b == 0 || b == -1 ? 0 : a % b)
TYPED_BINARY(mod, int, int, b == 0 || b == -1 ? 0 : (a % b != 0 && (a % b < 0) != (b < 0) ? a % b + b : a % b))
// clang-format on

// Ternary ops: three operands broadcast through a collapsed 4-d stride plan (_bc) or, when all
// have the output's shape, contiguous (_ff). Operand types are part of the op.
#define TERNARY(name, TC, TA, TB, TO, expr)                                                     \
  kernel void name##_ff(global const TC* C, global const TA* A, global const TB* B,             \
                        global TO* out, const int n, const float alpha, const float beta,       \
                        const int sel) {                                                        \
    FOR_EACH(i, n) {                                                                            \
      const TC c = C[i];                                                                        \
      const TA a = A[i];                                                                        \
      const TB b = B[i];                                                                        \
      out[i] = (expr);                                                                          \
    }                                                                                           \
  }                                                                                             \
  kernel void name##_bc(global const TC* C, global const TA* A, global const TB* B,             \
                        global TO* out, const int n, const int8 d, const int8 sc, const int8 sa, \
                        const int8 sb, const float alpha, const float beta, const int sel) {    \
    FOR_EACH(i, n) {                                                                            \
      const int3 o = offset8x3((int)i, d, sc, sa, sb);                                          \
      const TC c = C[o.x];                                                                      \
      const TA a = A[o.y];                                                                      \
      const TB b = B[o.z];                                                                      \
      out[i] = (expr);                                                                          \
    }                                                                                           \
  }

// clang-format off
// where(cond, a, b) moves 32-bit words: a and b may be float or int32.
TERNARY(where, int, uint, uint, uint, c != 0 ? a : b)
// (g, a, b): g where input `sel` (0: a, 1: b) won the forward's comparison, else 0
TERNARY(maximum_grad, float, float, float, float, ((a >= b || isnan(a)) == (sel == 0)) ? c : 0.0f)
TERNARY(minimum_grad, float, float, float, float, ((a <= b || isnan(a)) == (sel == 0)) ? c : 0.0f)
// clang-format on

// cast: float to int32 rounds toward zero and saturates, NaN gives 0 (as on the CPU); int32 to
// float rounds to nearest; a cast to the same type copies.
kernel void cast_f32_i32(global const float* x, global int* y, const int n) {
  FOR_EACH(i, n) {
    const float v = x[i];
    y[i] = isnan(v) ? 0 : convert_int_sat_rtz(v);
  }
}
kernel void cast_i32_f32(global const int* x, global float* y, const int n) {
  FOR_EACH(i, n) y[i] = convert_float(x[i]);
}
kernel void copy_u32(global const uint* x, global uint* y, const int n) {
  FOR_EACH(i, n) y[i] = x[i];
}
