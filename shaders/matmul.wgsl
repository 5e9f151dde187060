// C[M×N] = op(A)[M×K] · op(B)[K×N] (+ bias[N]) (then ReLU), all row-major f32.
// op(A) = A, or Aᵀ when TRANS_A (A stored K×M); op(B) = B, or Bᵀ when TRANS_B (B stored N×K).
//
// Each workgroup computes a 64×64 tile of C with 16×16 threads, each thread a
// 4×4 block held in registers. K is walked in slices of 16 staged through
// workgroup memory, stored k-major as vec4 so the inner loop is two vec4 loads
// and four vec4 FMAs. Edges are zero-padded on load and masked on store, so
// any M, N, K works.
//
// Split over K (weight gradients, where K is the batch): workgroup z computes
// the partial product over k in [z·KC, min(K, (z+1)·KC)) into its own M×N
// slice of C (C[z·M·N ..]); reduce_rows.wgsl then sums the slices in order.
// Unsplit: KC = K, one z.
//
// Strides: LDA, LDB, LDC are the row lengths of A, B and C as stored, and ZS
// the words between two K slices' partial products. Unsliced they follow
// from M, N, K (LDA = K, or M for Aᵀ; LDB = N, or K for Bᵀ; LDC = N;
// ZS = M·N); an operand bigger than one binding is planned as slices of rows
// or columns of a bigger matrix (matmul.ts, `planMatmulSliced`), which the
// strides address in place.

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override HAS_BIAS: bool = false;
override RELU: bool = false;

struct Dims { M: u32, N: u32, K: u32, KC: u32, LDA: u32, LDB: u32, LDC: u32, ZS: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: array<f32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;

const TILE = 64u;
const KT = 16u;
const TILE4 = 16u; // TILE / 4

// End of this workgroup's k range (split over K).
var<private> kEnd: u32;

var<workgroup> As: array<vec4<f32>, 256>; // [KT][TILE/4]
var<workgroup> Bs: array<vec4<f32>, 256>; // [KT][TILE/4]

fn loadA(row: u32, k: u32) -> f32 {
  if (row >= dims.M || k >= kEnd) { return 0.0; }
  if (TRANS_A) { return A[k * dims.LDA + row]; }
  return A[row * dims.LDA + k];
}

fn loadB(k: u32, col: u32) -> f32 {
  if (k >= kEnd || col >= dims.N) { return 0.0; }
  if (TRANS_B) { return B[col * dims.LDB + k]; }
  return B[k * dims.LDB + col];
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let row0 = wg.y * TILE;
  let col0 = wg.x * TILE;
  let tx = lid.x; // column group: columns tx*4 .. tx*4+3
  let ty = lid.y; // row group: rows ty*4 .. ty*4+3

  // Which 4 values this thread stages per slice. Both tiles are 16 k × 16 vec4.
  // For A, neighbouring threads take neighbouring k (contiguous when A is row-major);
  // for B, neighbouring threads take neighbouring column quads.
  let aK = t % KT;
  let aQ = t / KT;
  let bK = t / TILE4;
  let bQ = t % TILE4;

  var acc: array<vec4<f32>, 4>;
  for (var i = 0u; i < 4u; i++) { acc[i] = vec4<f32>(0.0); }

  let kb = wg.z * dims.KC;
  // A let, not kEnd: the loop holds barriers, so its bound must be uniform to the analysis.
  let ke = min(dims.K, kb + dims.KC);
  kEnd = ke;
  let slices = (ke - kb + KT - 1u) / KT;
  for (var s = 0u; s < slices; s++) {
    let k0 = kb + s * KT;
    let ar = row0 + aQ * 4u;
    As[aK * TILE4 + aQ] = vec4<f32>(loadA(ar, k0 + aK), loadA(ar + 1u, k0 + aK), loadA(ar + 2u, k0 + aK), loadA(ar + 3u, k0 + aK));
    let bc = col0 + bQ * 4u;
    Bs[bK * TILE4 + bQ] = vec4<f32>(loadB(k0 + bK, bc), loadB(k0 + bK, bc + 1u), loadB(k0 + bK, bc + 2u), loadB(k0 + bK, bc + 3u));
    workgroupBarrier();
    for (var k = 0u; k < KT; k++) {
      let a = As[k * TILE4 + ty];
      let b = Bs[k * TILE4 + tx];
      acc[0] += a.x * b;
      acc[1] += a.y * b;
      acc[2] += a.z * b;
      acc[3] += a.w * b;
    }
    workgroupBarrier();
  }

  for (var i = 0u; i < 4u; i++) {
    let row = row0 + ty * 4u + i;
    if (row >= dims.M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let col = col0 + tx * 4u + j;
      if (col >= dims.N) { break; }
      var v = acc[i][j];
      if (HAS_BIAS) { v += bias[col]; }
      if (RELU) { v = max(v, 0.0); }
      C[wg.z * dims.ZS + row * dims.LDC + col] = v;
    }
  }
}
