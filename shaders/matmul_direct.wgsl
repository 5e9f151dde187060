// C[M×N] = op(A)·op(B) (+ bias) (ReLU), like matmul.wgsl, for adapters that
// run compute shaders on a CPU (SwiftShader, llvmpipe). There a workgroup
// barrier costs a switch through every invocation of the workgroup, so this
// kernel uses no workgroup memory: each invocation computes a 4×4 block of C
// in registers from vec4 loads that the CPU's caches serve. (4×4, not more:
// CPU SIMD registers are few, and a larger block spills to memory.)
//
// Needs vec4 alignment (checked on the CPU, else matmul.wgsl runs):
//   A·B:  K % 4 == 0, N % 4 == 0
//   Aᵀ·B: M % 4 == 0, N % 4 == 0
//   A·Bᵀ: K % 4 == 0, N % 4 == 0
// Rows past M are clamped on load and skipped on store.

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override HAS_BIAS: bool = false;
override RELU: bool = false;

struct Dims { M: u32, N: u32, K: u32, _pad: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> B: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> C: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bias: array<vec4<f32>>;

fn dots(a: vec4<f32>, b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(dot(a, b0), dot(a, b1), dot(a, b2), dot(a, b3));
}

fn store(row: u32, q: u32, acc: vec4<f32>) {
  if (row >= dims.M) { return; }
  var v = acc;
  if (HAS_BIAS) { v += bias[q]; }
  if (RELU) { v = max(v, vec4<f32>(0.0)); }
  C[row * (dims.N / 4u) + q] = v;
}

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let q = gid.x;          // column quad: columns 4q .. 4q+3
  let r0 = gid.y * 4u;    // rows r0 .. r0+3
  let N4 = dims.N / 4u;
  if (q >= N4 || r0 >= dims.M) { return; }
  let last = dims.M - 1u;
  // Accumulators are named values, not an array, so that CPU compilers keep them in registers.
  var c0 = vec4<f32>(0.0);
  var c1 = vec4<f32>(0.0);
  var c2 = vec4<f32>(0.0);
  var c3 = vec4<f32>(0.0);
  if (TRANS_A) {
    // Aᵀ·B (A stored K×M): one k at a time, the outer product of 4 rows and 4 columns.
    let aq = min(r0, dims.M - 4u) / 4u;
    let M4 = dims.M / 4u;
    for (var k = 0u; k < dims.K; k++) {
      let a = A[k * M4 + aq];
      let b = B[k * N4 + q];
      c0 += a.x * b;
      c1 += a.y * b;
      c2 += a.z * b;
      c3 += a.w * b;
    }
  } else {
    let K4 = dims.K / 4u;
    let a0 = r0 * K4;
    let a1 = min(r0 + 1u, last) * K4;
    let a2 = min(r0 + 2u, last) * K4;
    let a3 = min(r0 + 3u, last) * K4;
    if (TRANS_B) {
      // A·Bᵀ (B stored N×K): both operands give vec4 along k; entries are sums of dot products.
      let j = 4u * q * K4;
      for (var k4 = 0u; k4 < K4; k4++) {
        let b0 = B[j + k4];
        let b1 = B[j + K4 + k4];
        let b2 = B[j + 2u * K4 + k4];
        let b3 = B[j + 3u * K4 + k4];
        c0 += dots(A[a0 + k4], b0, b1, b2, b3);
        c1 += dots(A[a1 + k4], b0, b1, b2, b3);
        c2 += dots(A[a2 + k4], b0, b1, b2, b3);
        c3 += dots(A[a3 + k4], b0, b1, b2, b3);
      }
    } else {
      // A·B: four k at a time; A rows give vec4 along k, B rows vec4 along n.
      for (var k4 = 0u; k4 < K4; k4++) {
        let base = 4u * k4 * N4 + q;
        let b0 = B[base];
        let b1 = B[base + N4];
        let b2 = B[base + 2u * N4];
        let b3 = B[base + 3u * N4];
        let x0 = A[a0 + k4];
        let x1 = A[a1 + k4];
        let x2 = A[a2 + k4];
        let x3 = A[a3 + k4];
        c0 += x0.x * b0 + x0.y * b1 + x0.z * b2 + x0.w * b3;
        c1 += x1.x * b0 + x1.y * b1 + x1.z * b2 + x1.w * b3;
        c2 += x2.x * b0 + x2.y * b1 + x2.z * b2 + x2.w * b3;
        c3 += x3.x * b0 + x3.y * b1 + x3.z * b2 + x3.w * b3;
      }
    }
  }
  store(r0, q, c0);
  store(r0 + 1u, q, c1);
  store(r0 + 2u, q, c2);
  store(r0 + 3u, q, c3);
}
