// C[M×N] = A[M×K]·B[K×N] (+ bias) (ReLU), for adapters that run compute
// shaders on a CPU (llvmpipe, SwiftShader), on big vec4-aligned shapes.
//
// Why so big a block (16 rows × 32 columns per invocation): on these adapters
// a storage-buffer load is done lane by lane (each of the SIMD lanes fetches
// its own scalars, with a bounds check per component), while a multiply-add
// runs on all lanes at once. The cost is the number of loaded components per
// multiply-add, so each invocation loads a 4×32 panel of B and a 16×4 panel
// of A per step and does 16·32·4 multiply-adds with them (10.7 per loaded
// component; 4×8 blocks get 2.7). Accumulators that spill go to the stack,
// which costs far less than a load.
//
// Needs (checked on the CPU by `wideFits`): K % 4 == 0, N % 4 == 0, M >= 16,
// N >= 32. Edge blocks are shifted back inside the matrix (`rs`, `qs`) so that
// every load is in range and unclamped; such a block stores only the entries
// at or after its own start (`r0`, `q0`), the rest belong to its neighbour.

override HAS_BIAS: bool = false;
override RELU: bool = false;

struct Dims { M: u32, N: u32, K: u32, _pad: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> B: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> C: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bias: array<vec4<f32>>;

const ROWS = 16u;
const QUADS = 8u; // 32 columns

// 32 consecutive columns of one row, as named fields so that they stay
// values (registers or spill slots) rather than an indexed array in memory.
struct Row { q0: vec4<f32>, q1: vec4<f32>, q2: vec4<f32>, q3: vec4<f32>, q4: vec4<f32>, q5: vec4<f32>, q6: vec4<f32>, q7: vec4<f32> }

fn loadB(at: u32) -> Row {
  return Row(B[at], B[at + 1u], B[at + 2u], B[at + 3u], B[at + 4u], B[at + 5u], B[at + 6u], B[at + 7u]);
}

// c += a.x·b0 + a.y·b1 + a.z·b2 + a.w·b3, where a holds 4 consecutive k of one A row.
fn fmaRow(c: Row, a: vec4<f32>, b0: Row, b1: Row, b2: Row, b3: Row) -> Row {
  return Row(
    c.q0 + a.x * b0.q0 + a.y * b1.q0 + a.z * b2.q0 + a.w * b3.q0,
    c.q1 + a.x * b0.q1 + a.y * b1.q1 + a.z * b2.q1 + a.w * b3.q1,
    c.q2 + a.x * b0.q2 + a.y * b1.q2 + a.z * b2.q2 + a.w * b3.q2,
    c.q3 + a.x * b0.q3 + a.y * b1.q3 + a.z * b2.q3 + a.w * b3.q3,
    c.q4 + a.x * b0.q4 + a.y * b1.q4 + a.z * b2.q4 + a.w * b3.q4,
    c.q5 + a.x * b0.q5 + a.y * b1.q5 + a.z * b2.q5 + a.w * b3.q5,
    c.q6 + a.x * b0.q6 + a.y * b1.q6 + a.z * b2.q6 + a.w * b3.q6,
    c.q7 + a.x * b0.q7 + a.y * b1.q7 + a.z * b2.q7 + a.w * b3.q7);
}

fn storeQuad(row: u32, q: u32, acc: vec4<f32>, firstQ: u32) {
  if (q < firstQ) { return; }
  var v = acc;
  if (HAS_BIAS) { v += bias[q]; }
  if (RELU) { v = max(v, vec4<f32>(0.0)); }
  C[row * (dims.N / 4u) + q] = v;
}

// Stores one block row (row index `row`, quads qs..qs+7) unless the row belongs to the block above.
fn storeRow(row: u32, firstRow: u32, qs: u32, firstQ: u32, c: Row) {
  if (row < firstRow) { return; }
  storeQuad(row, qs, c.q0, firstQ); storeQuad(row, qs + 1u, c.q1, firstQ);
  storeQuad(row, qs + 2u, c.q2, firstQ); storeQuad(row, qs + 3u, c.q3, firstQ);
  storeQuad(row, qs + 4u, c.q4, firstQ); storeQuad(row, qs + 5u, c.q5, firstQ);
  storeQuad(row, qs + 6u, c.q6, firstQ); storeQuad(row, qs + 7u, c.q7, firstQ);
}

@compute @workgroup_size(8, 2)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let K4 = dims.K / 4u;
  let N4 = dims.N / 4u;
  let r0 = gid.y * ROWS;
  let q0 = gid.x * QUADS;
  if (r0 >= dims.M || q0 >= N4) { return; }
  let rs = min(r0, dims.M - ROWS);
  let qs = min(q0, N4 - QUADS);

  var c0: Row; var c1: Row; var c2: Row; var c3: Row; var c4: Row; var c5: Row; var c6: Row; var c7: Row;
  var c8: Row; var c9: Row; var c10: Row; var c11: Row; var c12: Row; var c13: Row; var c14: Row; var c15: Row;
  let a = rs * K4; // A row rs, in vec4s; row rs + i starts at a + i·K4
  for (var k4 = 0u; k4 < K4; k4++) {
    let at = 4u * k4 * N4 + qs;
    let b0 = loadB(at);
    let b1 = loadB(at + N4);
    let b2 = loadB(at + 2u * N4);
    let b3 = loadB(at + 3u * N4);
    let x = a + k4;
    c0 = fmaRow(c0, A[x], b0, b1, b2, b3);
    c1 = fmaRow(c1, A[x + K4], b0, b1, b2, b3);
    c2 = fmaRow(c2, A[x + 2u * K4], b0, b1, b2, b3);
    c3 = fmaRow(c3, A[x + 3u * K4], b0, b1, b2, b3);
    c4 = fmaRow(c4, A[x + 4u * K4], b0, b1, b2, b3);
    c5 = fmaRow(c5, A[x + 5u * K4], b0, b1, b2, b3);
    c6 = fmaRow(c6, A[x + 6u * K4], b0, b1, b2, b3);
    c7 = fmaRow(c7, A[x + 7u * K4], b0, b1, b2, b3);
    c8 = fmaRow(c8, A[x + 8u * K4], b0, b1, b2, b3);
    c9 = fmaRow(c9, A[x + 9u * K4], b0, b1, b2, b3);
    c10 = fmaRow(c10, A[x + 10u * K4], b0, b1, b2, b3);
    c11 = fmaRow(c11, A[x + 11u * K4], b0, b1, b2, b3);
    c12 = fmaRow(c12, A[x + 12u * K4], b0, b1, b2, b3);
    c13 = fmaRow(c13, A[x + 13u * K4], b0, b1, b2, b3);
    c14 = fmaRow(c14, A[x + 14u * K4], b0, b1, b2, b3);
    c15 = fmaRow(c15, A[x + 15u * K4], b0, b1, b2, b3);
  }

  storeRow(rs, r0, qs, q0, c0); storeRow(rs + 1u, r0, qs, q0, c1);
  storeRow(rs + 2u, r0, qs, q0, c2); storeRow(rs + 3u, r0, qs, q0, c3);
  storeRow(rs + 4u, r0, qs, q0, c4); storeRow(rs + 5u, r0, qs, q0, c5);
  storeRow(rs + 6u, r0, qs, q0, c6); storeRow(rs + 7u, r0, qs, q0, c7);
  storeRow(rs + 8u, r0, qs, q0, c8); storeRow(rs + 9u, r0, qs, q0, c9);
  storeRow(rs + 10u, r0, qs, q0, c10); storeRow(rs + 11u, r0, qs, q0, c11);
  storeRow(rs + 12u, r0, qs, q0, c12); storeRow(rs + 13u, r0, qs, q0, c13);
  storeRow(rs + 14u, r0, qs, q0, c14); storeRow(rs + 15u, r0, qs, q0, c15);
}
