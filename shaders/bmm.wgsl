// Batched matmul: for every b < batch, C[b] = op(A[b]) · op(B[b]) (m×k times
// k×n), row-major, with op = transpose where TRANS_A / TRANS_B. Matrix b of A
// starts at b · strideA (strideA = 0: one A shared by every batch entry, as a
// Linear layer's weight is), likewise B and C. One output per invocation in
// 8×8 tiles; workgroups z = batch entry. Meant for attention-sized matrices;
// large 2-D products belong to matmul.wgsl and its variants.

struct Dims { m: u32, n: u32, k: u32, batch: u32, strideA: u32, strideB: u32, strideC: u32, _pad: u32 }

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let col = gid.x;
  let row = gid.y;
  let e = gid.z;
  if (row >= dims.m || col >= dims.n || e >= dims.batch) { return; }
  let a0 = e * dims.strideA;
  let b0 = e * dims.strideB;
  var acc = 0.0;
  for (var q = 0u; q < dims.k; q++) {
    var ai = a0 + row * dims.k + q;
    if (TRANS_A) { ai = a0 + q * dims.m + row; }
    var bi = b0 + q * dims.n + col;
    if (TRANS_B) { bi = b0 + col * dims.k + q; }
    acc += a[ai] * b[bi];
  }
  let o = e * dims.strideC + row * dims.n + col;
  if (ACCUMULATE) { c[o] += acc; } else { c[o] = acc; }
}
