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
//
// The tiles are in _matmul_tiled.wgsl, shared with matmul_tiled_f16.wgsl.

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

alias Elem = f32;
alias Tile4 = vec4<f32>;

// #import _matmul_tiled

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  tiledMain(wg, lid, t);
}
