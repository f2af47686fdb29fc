// SPDX-License-Identifier: Apache-2.0
// Data movement: slice, concat and their gradients, transpose. Elements are moved as 32-bit
// words, so the same kernels serve float and int32 tensors (and keep NaN payloads).
// Work-items stride through the output elements.

// Copies a band between two [outer, *, inner] layouts: for o < outer, j < len, k < inner,
// dst[(o * dst_d + dst_off + j) * inner + k] = src[(o * src_d + src_off + j) * inner + k].
kernel void copy_band(global const uint* src, global uint* dst, const int total, const int len,
                      const int inner, const int src_d, const int src_off, const int dst_d,
                      const int dst_off) {
  FOR_EACH(i, total) {
    const int k = (int)i % inner, t = (int)i / inner;
    const int j = t % len, o = t / len;
    dst[(o * dst_d + dst_off + j) * inner + k] = src[(o * src_d + src_off + j) * inner + k];
  }
}

// slice_grad: the output has `n` positions along the axis; [b, e) come from g, the rest are 0.
kernel void slice_grad(global const float* g, global float* out, const int total, const int n,
                       const int inner, const int b, const int e) {
  FOR_EACH(i, total) {
    const int k = (int)i % inner, t = (int)i / inner;
    const int j = t % n, o = t / n;
    out[i] = (j >= b && j < e) ? g[(o * (e - b) + j - b) * inner + k] : 0.0f;
  }
}

// Transpose through permuted strides: output dims od (row-major, leading unused dims 1), and
// the input stride of each output dim in is.
kernel void transpose_n(global const uint* x, global uint* y, const int total, const int8 od,
                        const int8 is) {
  FOR_EACH(i, total) y[i] = x[offset8((int)i, od, is)];
}

// Every element set to v (the zeros under slice_grad_n's pieces).
kernel void fill_f32(global float* out, const int total, const float v) {
  FOR_EACH(i, total) out[i] = v;
}

// strided_slice: y[i] = x[base + the index of i through the strides is] (is may be
// negative: a reversed axis); with `place`, the other way round into a zeroed x.
kernel void strided_copy(global const uint* src, global uint* dst, const int total,
                         const int base, const int8 od, const int8 is, const int place) {
  FOR_EACH(i, total) {
    const int at = base + offset8((int)i, od, is);
    if (place)
      dst[at] = src[i];
    else
      dst[i] = src[at];
  }
}
