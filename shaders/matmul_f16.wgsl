// C[M×N] = op(A)·op(B) (+ bias) (ReLU), with A and B stored as f16 and every
// product summed in f32: the linear layers of --precision f16-mixed
// (src/nn/ops/linear/f16-kernel.ts). A product of two f16 values is exact in
// f32 (11 + 11 significant bits), so widening first and multiplying in f32
// gives what an f16 multiply with an f32 accumulator gives. C and the bias
// stay f32.
//
// Each invocation computes a 4×4 block of C and uses no workgroup memory (the
// CPU adapters pay a switch through the workgroup for every barrier). Rows and
// columns past the edge are clamped on load and skipped on store: any shape.

enable f16;

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override HAS_BIAS: bool = false;
override RELU: bool = false;

struct Dims { M: u32, N: u32, K: u32, _pad: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> A: array<f16>;
@group(0) @binding(2) var<storage, read> B: array<f16>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;

// op(A)[r, k]: A stored M×K, or K×M when TRANS_A.
fn a_at(r: u32, k: u32) -> f32 {
  if (TRANS_A) { return f32(A[k * dims.M + r]); }
  return f32(A[r * dims.K + k]);
}

// op(B)[k, c]: B stored K×N, or N×K when TRANS_B.
fn b_at(k: u32, c: u32) -> f32 {
  if (TRANS_B) { return f32(B[c * dims.K + k]); }
  return f32(B[k * dims.N + c]);
}

fn store_row(r: u32, c0: u32, acc: vec4<f32>) {
  if (r >= dims.M) { return; }
  for (var j = 0u; j < 4u; j++) {
    let c = c0 + j;
    if (c >= dims.N) { return; }
    var v = acc[j];
    if (HAS_BIAS) { v += bias[c]; }
    if (RELU) { v = max(v, 0.0); }
    C[r * dims.N + c] = v;
  }
}

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c0 = gid.x * 4u;
  let r0 = gid.y * 4u;
  if (c0 >= dims.N || r0 >= dims.M) { return; }
  let lastR = dims.M - 1u;
  let lastC = dims.N - 1u;
  let r = vec4<u32>(r0, min(r0 + 1u, lastR), min(r0 + 2u, lastR), min(r0 + 3u, lastR));
  let c = vec4<u32>(c0, min(c0 + 1u, lastC), min(c0 + 2u, lastC), min(c0 + 3u, lastC));
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  for (var k = 0u; k < dims.K; k++) {
    let b = vec4<f32>(b_at(k, c.x), b_at(k, c.y), b_at(k, c.z), b_at(k, c.w));
    acc0 += a_at(r.x, k) * b;
    acc1 += a_at(r.y, k) * b;
    acc2 += a_at(r.z, k) * b;
    acc3 += a_at(r.w, k) * b;
  }
  store_row(r0, c0, acc0);
  store_row(r0 + 1u, c0, acc1);
  store_row(r0 + 2u, c0, acc2);
  store_row(r0 + 3u, c0, acc3);
}
