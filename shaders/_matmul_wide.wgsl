// The 32×32 blocks of matmul_wide.wgsl (f32 operands) and matmul_wide_f16.wgsl
// (f16 operands): C[M×N] = op(A)·op(B) (+ bias) (ReLU), summed in f32. The
// reasons for the block's size, its named-field accumulators and its shifted
// edge blocks are in matmul_wide.wgsl's header.
//
// The importing shader declares: the overrides TRANS_A, TRANS_B, HAS_BIAS and
// RELU; `dims` (M, N, K, KC); `C` and `bias` as array<vec4<f32>>; `ldA(i)` and
// `ldB(i)`, A's and B's i-th vec4 along their contiguous dimension as f32; and
// `blockNT(rs, qs, kb, ke) -> Block` for A·Bᵀ, whose best shape differs between
// the two (dot products in f32; in f16 a sum over k in order, see there).
// Every entry of C is its sum over k from kb up, one k at a time, in f32.

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
  return Row(ldB(at), ldB(at + 1u), ldB(at + 2u), ldB(at + 3u), ldB(at + 4u), ldB(at + 5u), ldB(at + 6u), ldB(at + 7u));
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

// A·B, 16 rows: row i's vec4 along k is A[x + i·K4].
fn halfNN(c: Half, x: u32, K4: u32, b0: Row, b1: Row, b2: Row, b3: Row) -> Half {
  return Half(
    fmaRow(c.r0, ldA(x), b0, b1, b2, b3),
    fmaRow(c.r1, ldA(x + K4), b0, b1, b2, b3),
    fmaRow(c.r2, ldA(x + 2u * K4), b0, b1, b2, b3),
    fmaRow(c.r3, ldA(x + 3u * K4), b0, b1, b2, b3),
    fmaRow(c.r4, ldA(x + 4u * K4), b0, b1, b2, b3),
    fmaRow(c.r5, ldA(x + 5u * K4), b0, b1, b2, b3),
    fmaRow(c.r6, ldA(x + 6u * K4), b0, b1, b2, b3),
    fmaRow(c.r7, ldA(x + 7u * K4), b0, b1, b2, b3),
    fmaRow(c.r8, ldA(x + 8u * K4), b0, b1, b2, b3),
    fmaRow(c.r9, ldA(x + 9u * K4), b0, b1, b2, b3),
    fmaRow(c.r10, ldA(x + 10u * K4), b0, b1, b2, b3),
    fmaRow(c.r11, ldA(x + 11u * K4), b0, b1, b2, b3),
    fmaRow(c.r12, ldA(x + 12u * K4), b0, b1, b2, b3),
    fmaRow(c.r13, ldA(x + 13u * K4), b0, b1, b2, b3),
    fmaRow(c.r14, ldA(x + 14u * K4), b0, b1, b2, b3),
    fmaRow(c.r15, ldA(x + 15u * K4), b0, b1, b2, b3));
}

// Aᵀ·B, 16 rows at one k: their A entries are 4 consecutive vec4s from A[at].
fn halfTN(c: Half, at: u32, b: Row) -> Half {
  let a0 = ldA(at); let a1 = ldA(at + 1u); let a2 = ldA(at + 2u); let a3 = ldA(at + 3u);
  return Half(axpyRow(c.r0, a0.x, b), axpyRow(c.r1, a0.y, b), axpyRow(c.r2, a0.z, b), axpyRow(c.r3, a0.w, b),
              axpyRow(c.r4, a1.x, b), axpyRow(c.r5, a1.y, b), axpyRow(c.r6, a1.z, b), axpyRow(c.r7, a1.w, b),
              axpyRow(c.r8, a2.x, b), axpyRow(c.r9, a2.y, b), axpyRow(c.r10, a2.z, b), axpyRow(c.r11, a2.w, b),
              axpyRow(c.r12, a3.x, b), axpyRow(c.r13, a3.y, b), axpyRow(c.r14, a3.z, b), axpyRow(c.r15, a3.w, b));
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

// The block of C this invocation owns (blocks in row-major order over a 1-D
// or folded 2-D grid, 16 invocations a workgroup), computed and stored.
fn wideMain(gid: vec3<u32>, groups: vec3<u32>) {
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
