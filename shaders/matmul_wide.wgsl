// C[M×N] = op(A)·op(B) (+ bias) (ReLU), like matmul.wgsl, for adapters that
// run compute shaders on a CPU (llvmpipe, SwiftShader), on big vec4-aligned
// shapes. op(A) = Aᵀ when TRANS_A (A stored K×M); op(B) = Bᵀ when TRANS_B (B
// stored N×K); not both.
//
// Why so big a block (32 rows × 32 columns per invocation): on these adapters
// a storage-buffer load is done lane by lane (each of the SIMD lanes fetches
// its own scalars, with a bounds check per component), while a multiply-add
// runs on all lanes at once. The cost is the number of loaded components per
// multiply-add, so per step of 4 k each invocation loads a 4×32 panel of B
// and a 32×4 panel of A (256 components) and does 32·32·4 multiply-adds with
// them (16 per loaded component; 4×8 blocks get 2.7). Accumulators that spill
// go to the stack, which costs far less than a load.
//
// Needs (checked on the CPU by `wideFits`): N % 4 == 0, M >= 32, N >= 32, and
// K % 4 == 0 (A·B, A·Bᵀ) or M % 4 == 0 (Aᵀ·B). Edge blocks are shifted back
// inside the matrix (`rs`, `qs`) so that every load is in range and
// unclamped; such a block stores only the entries at or after its own start
// (`r0`, `q0`), the rest belong to its neighbour.
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

const ROWS = 32u;
const QUADS = 8u; // 32 columns

// 32 consecutive columns of one row, as named fields so that they stay
// values (registers or spill slots) rather than an indexed array in memory.
struct Row { q0: vec4<f32>, q1: vec4<f32>, q2: vec4<f32>, q3: vec4<f32>, q4: vec4<f32>, q5: vec4<f32>, q6: vec4<f32>, q7: vec4<f32> }

// 16 rows of the block; a block is two halves that share every load of B.
struct Half { r0: Row, r1: Row, r2: Row, r3: Row, r4: Row, r5: Row, r6: Row, r7: Row,
              r8: Row, r9: Row, r10: Row, r11: Row, r12: Row, r13: Row, r14: Row, r15: Row }
struct Block { top: Half, bottom: Half }

fn loadB(at: u32) -> Row {
  return Row(B[at], B[at + 1u], B[at + 2u], B[at + 3u], B[at + 4u], B[at + 5u], B[at + 6u], B[at + 7u]);
}

// 8 B rows (Bᵀ: 8 columns of op(B)) at vec4 k4; row j of B starts at j·K4.
fn loadBt(j: u32, K4: u32, k4: u32) -> Row {
  let at = j * K4 + k4;
  return Row(B[at], B[at + K4], B[at + 2u * K4], B[at + 3u * K4], B[at + 4u * K4], B[at + 5u * K4], B[at + 6u * K4], B[at + 7u * K4]);
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

// c += a·b for a scalar a (one op(A) entry) and a row of B.
fn axpyRow(c: Row, a: f32, b: Row) -> Row {
  return Row(c.q0 + a * b.q0, c.q1 + a * b.q1, c.q2 + a * b.q2, c.q3 + a * b.q3,
             c.q4 + a * b.q4, c.q5 + a * b.q5, c.q6 + a * b.q6, c.q7 + a * b.q7);
}

fn dots(a: vec4<f32>, b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(dot(a, b0), dot(a, b1), dot(a, b2), dot(a, b3));
}

// c[j] += a·b[j] for 32 columns j whose B rows (Bᵀ) give vec4s along k: p0 holds columns 0..7, p1 8..15, p2 16..23, p3 24..31.
fn dotRow(c: Row, a: vec4<f32>, p0: Row, p1: Row, p2: Row, p3: Row) -> Row {
  return Row(c.q0 + dots(a, p0.q0, p0.q1, p0.q2, p0.q3), c.q1 + dots(a, p0.q4, p0.q5, p0.q6, p0.q7),
             c.q2 + dots(a, p1.q0, p1.q1, p1.q2, p1.q3), c.q3 + dots(a, p1.q4, p1.q5, p1.q6, p1.q7),
             c.q4 + dots(a, p2.q0, p2.q1, p2.q2, p2.q3), c.q5 + dots(a, p2.q4, p2.q5, p2.q6, p2.q7),
             c.q6 + dots(a, p3.q0, p3.q1, p3.q2, p3.q3), c.q7 + dots(a, p3.q4, p3.q5, p3.q6, p3.q7));
}

// A·B, 16 rows: row i's vec4 along k is A[x + i·K4].
fn halfNN(c: Half, x: u32, K4: u32, b0: Row, b1: Row, b2: Row, b3: Row) -> Half {
  return Half(
    fmaRow(c.r0, A[x], b0, b1, b2, b3),
    fmaRow(c.r1, A[x + K4], b0, b1, b2, b3),
    fmaRow(c.r2, A[x + 2u * K4], b0, b1, b2, b3),
    fmaRow(c.r3, A[x + 3u * K4], b0, b1, b2, b3),
    fmaRow(c.r4, A[x + 4u * K4], b0, b1, b2, b3),
    fmaRow(c.r5, A[x + 5u * K4], b0, b1, b2, b3),
    fmaRow(c.r6, A[x + 6u * K4], b0, b1, b2, b3),
    fmaRow(c.r7, A[x + 7u * K4], b0, b1, b2, b3),
    fmaRow(c.r8, A[x + 8u * K4], b0, b1, b2, b3),
    fmaRow(c.r9, A[x + 9u * K4], b0, b1, b2, b3),
    fmaRow(c.r10, A[x + 10u * K4], b0, b1, b2, b3),
    fmaRow(c.r11, A[x + 11u * K4], b0, b1, b2, b3),
    fmaRow(c.r12, A[x + 12u * K4], b0, b1, b2, b3),
    fmaRow(c.r13, A[x + 13u * K4], b0, b1, b2, b3),
    fmaRow(c.r14, A[x + 14u * K4], b0, b1, b2, b3),
    fmaRow(c.r15, A[x + 15u * K4], b0, b1, b2, b3));
}

// Aᵀ·B, 16 rows at one k: their A entries are 4 consecutive vec4s from A[at].
fn halfTN(c: Half, at: u32, b: Row) -> Half {
  let a0 = A[at]; let a1 = A[at + 1u]; let a2 = A[at + 2u]; let a3 = A[at + 3u];
  return Half(axpyRow(c.r0, a0.x, b), axpyRow(c.r1, a0.y, b), axpyRow(c.r2, a0.z, b), axpyRow(c.r3, a0.w, b),
              axpyRow(c.r4, a1.x, b), axpyRow(c.r5, a1.y, b), axpyRow(c.r6, a1.z, b), axpyRow(c.r7, a1.w, b),
              axpyRow(c.r8, a2.x, b), axpyRow(c.r9, a2.y, b), axpyRow(c.r10, a2.z, b), axpyRow(c.r11, a2.w, b),
              axpyRow(c.r12, a3.x, b), axpyRow(c.r13, a3.y, b), axpyRow(c.r14, a3.z, b), axpyRow(c.r15, a3.w, b));
}

// A·Bᵀ, 16 rows: row i's vec4 along k is A[x + i·K4].
fn halfNT(c: Half, x: u32, K4: u32, p0: Row, p1: Row, p2: Row, p3: Row) -> Half {
  return Half(
    dotRow(c.r0, A[x], p0, p1, p2, p3),
    dotRow(c.r1, A[x + K4], p0, p1, p2, p3),
    dotRow(c.r2, A[x + 2u * K4], p0, p1, p2, p3),
    dotRow(c.r3, A[x + 3u * K4], p0, p1, p2, p3),
    dotRow(c.r4, A[x + 4u * K4], p0, p1, p2, p3),
    dotRow(c.r5, A[x + 5u * K4], p0, p1, p2, p3),
    dotRow(c.r6, A[x + 6u * K4], p0, p1, p2, p3),
    dotRow(c.r7, A[x + 7u * K4], p0, p1, p2, p3),
    dotRow(c.r8, A[x + 8u * K4], p0, p1, p2, p3),
    dotRow(c.r9, A[x + 9u * K4], p0, p1, p2, p3),
    dotRow(c.r10, A[x + 10u * K4], p0, p1, p2, p3),
    dotRow(c.r11, A[x + 11u * K4], p0, p1, p2, p3),
    dotRow(c.r12, A[x + 12u * K4], p0, p1, p2, p3),
    dotRow(c.r13, A[x + 13u * K4], p0, p1, p2, p3),
    dotRow(c.r14, A[x + 14u * K4], p0, p1, p2, p3),
    dotRow(c.r15, A[x + 15u * K4], p0, p1, p2, p3));
}

// A·B: per k4, a 4×32 panel of B and a vec4 along k from each of 32 A rows.
fn blockNN(rs: u32, qs: u32, kb: u32, ke: u32) -> Block {
  let K4 = dims.K / 4u;
  let N4 = dims.N / 4u;
  var c: Block;
  for (var k4 = kb / 4u; k4 < ke / 4u; k4++) {
    let at = 4u * k4 * N4 + qs;
    let b0 = loadB(at);
    let b1 = loadB(at + N4);
    let b2 = loadB(at + 2u * N4);
    let b3 = loadB(at + 3u * N4);
    let x = rs * K4 + k4;
    c.top = halfNN(c.top, x, K4, b0, b1, b2, b3);
    c.bottom = halfNN(c.bottom, x + 16u * K4, K4, b0, b1, b2, b3);
  }
  return c;
}

// Aᵀ·B (A stored K×M): per k, one B row and 32 consecutive entries of A row k.
fn blockTN(rs: u32, qs: u32, kb: u32, ke: u32) -> Block {
  let M4 = dims.M / 4u;
  let N4 = dims.N / 4u;
  var c: Block;
  for (var k = kb; k < ke; k++) {
    let b = loadB(k * N4 + qs);
    let at = k * M4 + rs / 4u;
    c.top = halfTN(c.top, at, b);
    c.bottom = halfTN(c.bottom, at + 4u, b);
  }
  return c;
}

// A·Bᵀ (B stored N×K): per k4, vec4s along k from 32 B rows and 32 A rows; each C entry gains a dot product.
fn blockNT(rs: u32, qs: u32, kb: u32, ke: u32) -> Block {
  let K4 = dims.K / 4u;
  let j = qs * 4u; // first column of the block = first B row
  var c: Block;
  for (var k4 = kb / 4u; k4 < ke / 4u; k4++) {
    let p0 = loadBt(j, K4, k4);
    let p1 = loadBt(j + 8u, K4, k4);
    let p2 = loadBt(j + 16u, K4, k4);
    let p3 = loadBt(j + 24u, K4, k4);
    let x = rs * K4 + k4;
    c.top = halfNT(c.top, x, K4, p0, p1, p2, p3);
    c.bottom = halfNT(c.bottom, x + 16u * K4, K4, p0, p1, p2, p3);
  }
  return c;
}

// First vec4 of this workgroup's C slice (split over K).
var<private> cBase: u32;

fn storeQuad(row: u32, q: u32, acc: vec4<f32>, firstQ: u32) {
  if (q < firstQ) { return; }
  var v = acc;
  if (HAS_BIAS) { v += bias[q]; }
  if (RELU) { v = max(v, vec4<f32>(0.0)); }
  C[cBase + row * (dims.N / 4u) + q] = v;
}

// Stores one block row (row index `row`, quads qs..qs+7) unless the row belongs to the block above.
fn storeRow(row: u32, firstRow: u32, qs: u32, firstQ: u32, c: Row) {
  if (row < firstRow) { return; }
  storeQuad(row, qs, c.q0, firstQ); storeQuad(row, qs + 1u, c.q1, firstQ);
  storeQuad(row, qs + 2u, c.q2, firstQ); storeQuad(row, qs + 3u, c.q3, firstQ);
  storeQuad(row, qs + 4u, c.q4, firstQ); storeQuad(row, qs + 5u, c.q5, firstQ);
  storeQuad(row, qs + 6u, c.q6, firstQ); storeQuad(row, qs + 7u, c.q7, firstQ);
}

// Stores 16 block rows from row `top` on.
fn storeHalf(top: u32, firstRow: u32, qs: u32, firstQ: u32, c: Half) {
  storeRow(top, firstRow, qs, firstQ, c.r0); storeRow(top + 1u, firstRow, qs, firstQ, c.r1);
  storeRow(top + 2u, firstRow, qs, firstQ, c.r2); storeRow(top + 3u, firstRow, qs, firstQ, c.r3);
  storeRow(top + 4u, firstRow, qs, firstQ, c.r4); storeRow(top + 5u, firstRow, qs, firstQ, c.r5);
  storeRow(top + 6u, firstRow, qs, firstQ, c.r6); storeRow(top + 7u, firstRow, qs, firstQ, c.r7);
  storeRow(top + 8u, firstRow, qs, firstQ, c.r8); storeRow(top + 9u, firstRow, qs, firstQ, c.r9);
  storeRow(top + 10u, firstRow, qs, firstQ, c.r10); storeRow(top + 11u, firstRow, qs, firstQ, c.r11);
  storeRow(top + 12u, firstRow, qs, firstQ, c.r12); storeRow(top + 13u, firstRow, qs, firstQ, c.r13);
  storeRow(top + 14u, firstRow, qs, firstQ, c.r14); storeRow(top + 15u, firstRow, qs, firstQ, c.r15);
}

// Blocks are numbered row-major (block row, then block column) and handed
// out in that order, 16 to a workgroup, so only the last workgroup has idle
// invocations: a 2-D grid of fixed 8×2 workgroups left whole SIMD groups
// idle where the block columns are not a multiple of 8 (N = 784: 25 block
// columns in 32 slots). The workgroup count may be folded into a 2-D grid
// (more than 65,535 workgroups); the block number runs across both.
@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let N4 = dims.N / 4u;
  let blockCols = (N4 + QUADS - 1u) / QUADS;
  let blockRows = (dims.M + ROWS - 1u) / ROWS;
  let id = gid.y * groups.x * 16u + gid.x;
  if (id >= blockRows * blockCols) { return; }
  let r0 = (id / blockCols) * ROWS;
  let q0 = (id % blockCols) * QUADS;
  let rs = min(r0, dims.M - ROWS);
  let qs = min(q0, N4 - QUADS);
  var c: Block;
  let kb = gid.z * dims.KC;
  let ke = min(dims.K, kb + dims.KC);
  cBase = gid.z * dims.M * N4;
  if (TRANS_A) { c = blockTN(rs, qs, kb, ke); } else if (TRANS_B) { c = blockNT(rs, qs, kb, ke); } else { c = blockNN(rs, qs, kb, ke); }
  storeHalf(rs, r0, qs, q0, c.top);
  storeHalf(rs + 16u, r0, qs, q0, c.bottom);
}
