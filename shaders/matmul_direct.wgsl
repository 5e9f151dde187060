// C[M×N] = op(A)·op(B) (+ bias) (ReLU), like matmul.wgsl, for adapters that
// run compute shaders on a CPU (SwiftShader, llvmpipe). There a workgroup
// barrier costs a switch through every invocation of the workgroup, so this
// kernel uses no workgroup memory: each invocation computes a 4×8 block of C
// in registers from vec4 loads that the CPU's caches serve.
//
// Needs vec4 alignment (checked on the CPU, else matmul.wgsl runs):
//   A·B:  K % 4 == 0, N % 4 == 0
//   Aᵀ·B: M % 4 == 0, N % 4 == 0
//   A·Bᵀ: K % 4 == 0, N % 4 == 0
// Rows past M are clamped on load and skipped on store; so are column quads past N.
//
// Split over K (weight gradients, where K is the batch): workgroup z computes
// the partial product over k in [z·KC, min(K, (z+1)·KC)) into its own M×N
// slice of C (C[z·M·N ..]); reduce_rows.wgsl then sums the slices in order.
// Unsplit: KC = K, one z.
// (KC is a multiple of 4.)

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override HAS_BIAS: bool = false;
override RELU: bool = false;

struct Dims { M: u32, N: u32, K: u32, KC: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> B: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> C: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bias: array<vec4<f32>>;

fn rowOf(r0: u32, i: u32) -> u32 { return min(r0 + i, dims.M - 1u); }
fn quadOf(c0: u32, h: u32) -> u32 { return min(c0 + 4u * h, dims.N - 4u) / 4u; }

// Accumulators are named values, not an array, so that CPU compilers keep
// them in registers: a dynamically indexed array goes to memory.
struct Acc { r00: vec4<f32>, r01: vec4<f32>, r10: vec4<f32>, r11: vec4<f32>, r20: vec4<f32>, r21: vec4<f32>, r30: vec4<f32>, r31: vec4<f32> }

// A·B: walk K four at a time; A rows give vec4 along k, B rows give vec4 along n.
fn loopNN(r0: u32, c0: u32, kb: u32, ke: u32) -> Acc {
  var c: Acc;
  let K4 = dims.K / 4u;
  let N4 = dims.N / 4u;
  let q0 = quadOf(c0, 0u);
  let q1 = quadOf(c0, 1u);
  let a0 = rowOf(r0, 0u) * K4; let a1 = rowOf(r0, 1u) * K4; let a2 = rowOf(r0, 2u) * K4; let a3 = rowOf(r0, 3u) * K4;
  for (var k4 = kb / 4u; k4 < ke / 4u; k4++) {
    let base = 4u * k4 * N4;
    let b00 = B[base + q0]; let b01 = B[base + q1];
    let b10 = B[base + N4 + q0]; let b11 = B[base + N4 + q1];
    let b20 = B[base + 2u * N4 + q0]; let b21 = B[base + 2u * N4 + q1];
    let b30 = B[base + 3u * N4 + q0]; let b31 = B[base + 3u * N4 + q1];
    let x0 = A[a0 + k4]; let x1 = A[a1 + k4]; let x2 = A[a2 + k4]; let x3 = A[a3 + k4];
    c.r00 += x0.x * b00 + x0.y * b10 + x0.z * b20 + x0.w * b30;
    c.r01 += x0.x * b01 + x0.y * b11 + x0.z * b21 + x0.w * b31;
    c.r10 += x1.x * b00 + x1.y * b10 + x1.z * b20 + x1.w * b30;
    c.r11 += x1.x * b01 + x1.y * b11 + x1.z * b21 + x1.w * b31;
    c.r20 += x2.x * b00 + x2.y * b10 + x2.z * b20 + x2.w * b30;
    c.r21 += x2.x * b01 + x2.y * b11 + x2.z * b21 + x2.w * b31;
    c.r30 += x3.x * b00 + x3.y * b10 + x3.z * b20 + x3.w * b30;
    c.r31 += x3.x * b01 + x3.y * b11 + x3.z * b21 + x3.w * b31;
  }
  return c;
}

// Aᵀ·B (A stored K×M): one k at a time, an outer product of 4 rows by 8 columns.
fn loopTN(r0: u32, c0: u32, kb: u32, ke: u32) -> Acc {
  var c: Acc;
  let M4 = dims.M / 4u;
  let N4 = dims.N / 4u;
  let aq = min(r0, dims.M - 4u) / 4u;
  let q0 = quadOf(c0, 0u);
  let q1 = quadOf(c0, 1u);
  for (var k = kb; k < ke; k++) {
    let a = A[k * M4 + aq];
    let b0 = B[k * N4 + q0];
    let b1 = B[k * N4 + q1];
    c.r00 += a.x * b0; c.r01 += a.x * b1;
    c.r10 += a.y * b0; c.r11 += a.y * b1;
    c.r20 += a.z * b0; c.r21 += a.z * b1;
    c.r30 += a.w * b0; c.r31 += a.w * b1;
  }
  return c;
}

fn dots(a: vec4<f32>, b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(dot(a, b0), dot(a, b1), dot(a, b2), dot(a, b3));
}

// A·Bᵀ (B stored N×K): both operands give vec4 along k; each C entry is a sum of dot products.
fn loopNT(r0: u32, c0: u32, kb: u32, ke: u32) -> Acc {
  var c: Acc;
  let K4 = dims.K / 4u;
  let n = dims.N - 1u;
  let a0 = rowOf(r0, 0u) * K4; let a1 = rowOf(r0, 1u) * K4; let a2 = rowOf(r0, 2u) * K4; let a3 = rowOf(r0, 3u) * K4;
  let j0 = min(c0, n) * K4; let j1 = min(c0 + 1u, n) * K4; let j2 = min(c0 + 2u, n) * K4; let j3 = min(c0 + 3u, n) * K4;
  let j4 = min(c0 + 4u, n) * K4; let j5 = min(c0 + 5u, n) * K4; let j6 = min(c0 + 6u, n) * K4; let j7 = min(c0 + 7u, n) * K4;
  for (var k4 = kb / 4u; k4 < ke / 4u; k4++) {
    let b0 = B[j0 + k4]; let b1 = B[j1 + k4]; let b2 = B[j2 + k4]; let b3 = B[j3 + k4];
    let b4 = B[j4 + k4]; let b5 = B[j5 + k4]; let b6 = B[j6 + k4]; let b7 = B[j7 + k4];
    let x0 = A[a0 + k4]; let x1 = A[a1 + k4]; let x2 = A[a2 + k4]; let x3 = A[a3 + k4];
    c.r00 += dots(x0, b0, b1, b2, b3); c.r01 += dots(x0, b4, b5, b6, b7);
    c.r10 += dots(x1, b0, b1, b2, b3); c.r11 += dots(x1, b4, b5, b6, b7);
    c.r20 += dots(x2, b0, b1, b2, b3); c.r21 += dots(x2, b4, b5, b6, b7);
    c.r30 += dots(x3, b0, b1, b2, b3); c.r31 += dots(x3, b4, b5, b6, b7);
  }
  return c;
}

fn store(z: u32, row: u32, q: u32, acc: vec4<f32>) {
  if (row >= dims.M || q >= dims.N / 4u) { return; }
  var v = acc;
  if (HAS_BIAS) { v += bias[q]; }
  if (RELU) { v = max(v, vec4<f32>(0.0)); }
  C[z * dims.M * (dims.N / 4u) + row * (dims.N / 4u) + q] = v;
}

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c0 = gid.x * 8u;
  let r0 = gid.y * 4u;
  if (c0 >= dims.N || r0 >= dims.M) { return; }
  var c: Acc;
  let z = gid.z;
  let kb = z * dims.KC;
  let ke = min(dims.K, kb + dims.KC);
  if (TRANS_A) { c = loopTN(r0, c0, kb, ke); } else if (TRANS_B) { c = loopNT(r0, c0, kb, ke); } else { c = loopNN(r0, c0, kb, ke); }
  let q = c0 / 4u;
  store(z, r0, q, c.r00); store(z, r0, q + 1u, c.r01);
  store(z, r0 + 1u, q, c.r10); store(z, r0 + 1u, q + 1u, c.r11);
  store(z, r0 + 2u, q, c.r20); store(z, r0 + 2u, q + 1u, c.r21);
  store(z, r0 + 3u, q, c.r30); store(z, r0 + 3u, q + 1u, c.r31);
}
