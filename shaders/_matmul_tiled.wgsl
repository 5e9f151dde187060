// The 64×64 workgroup tiles of matmul.wgsl (f32 operands) and
// matmul_tiled_f16.wgsl (f16 operands): C = op(A)·op(B) (+ bias) (ReLU),
// summed in f32 (matmul.wgsl's header says how the tiles work). The
// importing shader declares the overrides TRANS_A, TRANS_B, HAS_BIAS and RELU,
// `dims` (M, N, K, KC, LDA, LDB, LDC, ZS), the bindings A, B (array<Elem>), C
// and bias (array<f32>), and the aliases `Elem` (A's and B's scalar type) and
// `Tile4` (vec4<Elem>: what the workgroup tiles hold). Every entry of C is its
// sum over k from kb up, one k at a time, in f32 (edges padded with zeros).

const TILE = 64u;
const KT = 16u;
const TILE4 = 16u; // TILE / 4

// End of this workgroup's k range (split over K).
var<private> kEnd: u32;

var<workgroup> As: array<Tile4, 256>; // [KT][TILE/4]
var<workgroup> Bs: array<Tile4, 256>; // [KT][TILE/4]

fn loadA(row: u32, k: u32) -> Elem {
  if (row >= dims.M || k >= kEnd) { return 0.0; }
  if (TRANS_A) { return A[k * dims.LDA + row]; }
  return A[row * dims.LDA + k];
}

fn loadB(k: u32, col: u32) -> Elem {
  if (k >= kEnd || col >= dims.N) { return 0.0; }
  if (TRANS_B) { return B[col * dims.LDB + k]; }
  return B[k * dims.LDB + col];
}

// The workgroup's 64×64 tile of C (workgroups of 16×16 invocations).
fn tiledMain(wg: vec3<u32>, lid: vec3<u32>, t: u32) {
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
    As[aK * TILE4 + aQ] = Tile4(loadA(ar, k0 + aK), loadA(ar + 1u, k0 + aK), loadA(ar + 2u, k0 + aK), loadA(ar + 3u, k0 + aK));
    let bc = col0 + bQ * 4u;
    Bs[bK * TILE4 + bQ] = Tile4(loadB(k0 + bK, bc), loadB(k0 + bK, bc + 1u), loadB(k0 + bK, bc + 2u), loadB(k0 + bK, bc + 3u));
    workgroupBarrier();
    for (var k = 0u; k < KT; k++) {
      let a = vec4<f32>(As[k * TILE4 + ty]);
      let b = vec4<f32>(Bs[k * TILE4 + tx]);
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
