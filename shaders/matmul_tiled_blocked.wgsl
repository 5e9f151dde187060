// C[M×N] = op(A)·op(B) (+ bias[N]) (then ReLU), row-major f32, for hardware
// GPUs. op(A) = Aᵀ when TRANS_A (A stored K×M); op(B) = Bᵀ when TRANS_B (B
// stored N×K); any combination.
//
// Register blocking: a workgroup of 16×16 invocations computes a 128×128
// tile of C, each invocation an 8×8 block held in 16 vec4 accumulators. K is
// walked in slices of 8 staged through workgroup memory, k-major, so the
// inner loop reads 4 vec4s (two 4-row pieces of A, two 4-column pieces of B)
// and does 64 multiply-adds with them. An invocation's 8 rows are two groups
// of 4, 64 rows apart (likewise its columns), so neighbouring invocations
// read neighbouring vec4s of the staged tile.
//
// Global loads are vec4 along each matrix's contiguous dimension (k for A
// and Bᵀ, m for Aᵀ, n for B), one per invocation per tile per slice. Needs
// (checked on the CPU by `blockedFits`): N % 4 == 0 (C and bias are stored
// as vec4), and the contiguous dimension of A and of B a multiple of 4. Rows
// and columns past the edges are loaded as zero and not stored.

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override HAS_BIAS: bool = false;
override RELU: bool = false;
// > 0: walk the tiles in bands of GROUP_ROWS tile rows, down each band's columns, so that the
// workgroups resident at one time read the same rows of A and columns of B (reuse in L2 on
// large M and N); 0: row-major tile order.
override GROUP_ROWS: u32 = 0u;

// Split over K (weight gradients, where K is the batch): workgroup z computes
// the partial product over k in [z·KC, min(K, (z+1)·KC)) into its own M×N
// slice of C (C[z·M·N ..]); reduce_rows.wgsl then sums the slices in order.
// Unsplit: KC = K, one z.
struct Dims { M: u32, N: u32, K: u32, KC: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> B: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> C: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bias: array<vec4<f32>>;

const TILE = 128u;
const TILE4 = 32u; // vec4s across a tile
const KT = 8u;     // k per slice
const HALF4 = 16u; // the second group of 4 rows/columns starts 64 (16 vec4s) later

// End of this workgroup's k range (split over K), and the first vec4 of its C slice.
var<private> kEnd: u32;
var<private> cBase: u32;

var<workgroup> As: array<vec4<f32>, 256>; // [KT][TILE4]: op(A) rows as vec4s, per k
var<workgroup> Bs: array<vec4<f32>, 256>; // [KT][TILE4]: op(B) columns as vec4s, per k

// Stages the 128×8 slice of op(A) from k0 (one vec4 per invocation).
fn stageA(t: u32, row0: u32, k0: u32) {
  if (TRANS_A) {
    // A is K×M: a vec4 holds 4 consecutive rows of op(A) at one k.
    let k = t / TILE4;
    let q = t % TILE4;
    let row = row0 + q * 4u;
    var v = vec4<f32>(0.0);
    if (k0 + k < kEnd && row < dims.M) { v = A[((k0 + k) * dims.M + row) / 4u]; }
    As[k * TILE4 + q] = v;
  } else {
    // A is M×K: a vec4 holds 4 consecutive k of one row; spread it over 4 k-rows of As.
    let r = t / 2u;
    let kq = (t % 2u) * 4u;
    let row = row0 + r;
    var v = vec4<f32>(0.0);
    if (row < dims.M && k0 + kq < kEnd) { v = A[(row * dims.K + k0 + kq) / 4u]; }
    let slot = r / 4u;
    let lane = r % 4u;
    As[(kq + 0u) * TILE4 + slot][lane] = v.x;
    As[(kq + 1u) * TILE4 + slot][lane] = v.y;
    As[(kq + 2u) * TILE4 + slot][lane] = v.z;
    As[(kq + 3u) * TILE4 + slot][lane] = v.w;
  }
}

// Stages the 8×128 slice of op(B) from k0 (one vec4 per invocation).
fn stageB(t: u32, col0: u32, k0: u32) {
  if (TRANS_B) {
    // B is N×K: a vec4 holds 4 consecutive k of one column of op(B).
    let c = t / 2u;
    let kq = (t % 2u) * 4u;
    let col = col0 + c;
    var v = vec4<f32>(0.0);
    if (col < dims.N && k0 + kq < kEnd) { v = B[(col * dims.K + k0 + kq) / 4u]; }
    let slot = c / 4u;
    let lane = c % 4u;
    Bs[(kq + 0u) * TILE4 + slot][lane] = v.x;
    Bs[(kq + 1u) * TILE4 + slot][lane] = v.y;
    Bs[(kq + 2u) * TILE4 + slot][lane] = v.z;
    Bs[(kq + 3u) * TILE4 + slot][lane] = v.w;
  } else {
    // B is K×N: a vec4 holds 4 consecutive columns at one k.
    let k = t / TILE4;
    let q = t % TILE4;
    let col = col0 + q * 4u;
    var v = vec4<f32>(0.0);
    if (k0 + k < kEnd && col < dims.N) { v = B[((k0 + k) * dims.N + col) / 4u]; }
    Bs[k * TILE4 + q] = v;
  }
}

fn store(row: u32, q: u32, acc: vec4<f32>) {
  if (row >= dims.M || q * 4u >= dims.N) { return; }
  var v = acc;
  if (HAS_BIAS) { v += bias[q]; }
  if (RELU) { v = max(v, vec4<f32>(0.0)); }
  C[cBase + row * (dims.N / 4u) + q] = v;
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) t: u32, @builtin(num_workgroups) nwg: vec3<u32>) {
  var tileRow = wg.y;
  var tileCol = wg.x;
  if (GROUP_ROWS > 0u) {
    let id = wg.y * nwg.x + wg.x;
    let perBand = GROUP_ROWS * nwg.x;
    let first = (id / perBand) * GROUP_ROWS;
    let rows = min(nwg.y - first, GROUP_ROWS);
    tileRow = first + (id % perBand) % rows;
    tileCol = (id % perBand) / rows;
  }
  let row0 = tileRow * TILE;
  let col0 = tileCol * TILE;
  let tx = lid.x;
  let ty = lid.y;

  // acc[2i + h]: row (i < 4 ? ty*4 + i : 64 + ty*4 + i - 4), columns of half h (tx*4.. or 64 + tx*4..).
  var acc: array<vec4<f32>, 16>;
  for (var i = 0u; i < 16u; i++) { acc[i] = vec4<f32>(0.0); }

  let kb = wg.z * dims.KC;
  // A let, not kEnd: the loop holds barriers, so its bound must be uniform to the analysis.
  let ke = min(dims.K, kb + dims.KC);
  kEnd = ke;
  cBase = wg.z * dims.M * (dims.N / 4u);
  for (var k0 = kb; k0 < ke; k0 += KT) {
    stageA(t, row0, k0);
    stageB(t, col0, k0);
    workgroupBarrier();
    for (var k = 0u; k < KT; k++) {
      let a0 = As[k * TILE4 + ty];
      let a1 = As[k * TILE4 + HALF4 + ty];
      let b0 = Bs[k * TILE4 + tx];
      let b1 = Bs[k * TILE4 + HALF4 + tx];
      acc[0] += a0.x * b0; acc[1] += a0.x * b1;
      acc[2] += a0.y * b0; acc[3] += a0.y * b1;
      acc[4] += a0.z * b0; acc[5] += a0.z * b1;
      acc[6] += a0.w * b0; acc[7] += a0.w * b1;
      acc[8] += a1.x * b0; acc[9] += a1.x * b1;
      acc[10] += a1.y * b0; acc[11] += a1.y * b1;
      acc[12] += a1.z * b0; acc[13] += a1.z * b1;
      acc[14] += a1.w * b0; acc[15] += a1.w * b1;
    }
    workgroupBarrier();
  }

  let colQ0 = col0 / 4u + tx;
  let colQ1 = colQ0 + HALF4;
  for (var i = 0u; i < 4u; i++) {
    let r0 = row0 + ty * 4u + i;
    let r1 = r0 + 64u;
    store(r0, colQ0, acc[2u * i]);
    store(r0, colQ1, acc[2u * i + 1u]);
    store(r1, colQ0, acc[8u + 2u * i]);
    store(r1, colQ1, acc[8u + 2u * i + 1u]);
  }
}
