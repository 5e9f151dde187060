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
//
// The blocks are in _matmul_wide.wgsl, shared with matmul_wide_f16.wgsl (f16
// operands); A·Bᵀ's dot products are this file's own.

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

fn ldA(i: u32) -> vec4<f32> { return A[i]; }
fn ldB(i: u32) -> vec4<f32> { return B[i]; }

// #import _matmul_wide

// 8 B rows (Bᵀ: 8 columns of op(B)) at vec4 k4; row j of B starts at j·K4.
fn loadBt(j: u32, K4: u32, k4: u32) -> Row {
  let at = j * K4 + k4;
  return Row(ldB(at), ldB(at + K4), ldB(at + 2u * K4), ldB(at + 3u * K4), ldB(at + 4u * K4), ldB(at + 5u * K4), ldB(at + 6u * K4), ldB(at + 7u * K4));
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

// A·Bᵀ, 16 rows: row i's vec4 along k is ldA(x + i·K4).
fn halfNT(c: Half, x: u32, K4: u32, p0: Row, p1: Row, p2: Row, p3: Row) -> Half {
  return Half(
    dotRow(c.r0, ldA(x), p0, p1, p2, p3),
    dotRow(c.r1, ldA(x + K4), p0, p1, p2, p3),
    dotRow(c.r2, ldA(x + 2u * K4), p0, p1, p2, p3),
    dotRow(c.r3, ldA(x + 3u * K4), p0, p1, p2, p3),
    dotRow(c.r4, ldA(x + 4u * K4), p0, p1, p2, p3),
    dotRow(c.r5, ldA(x + 5u * K4), p0, p1, p2, p3),
    dotRow(c.r6, ldA(x + 6u * K4), p0, p1, p2, p3),
    dotRow(c.r7, ldA(x + 7u * K4), p0, p1, p2, p3),
    dotRow(c.r8, ldA(x + 8u * K4), p0, p1, p2, p3),
    dotRow(c.r9, ldA(x + 9u * K4), p0, p1, p2, p3),
    dotRow(c.r10, ldA(x + 10u * K4), p0, p1, p2, p3),
    dotRow(c.r11, ldA(x + 11u * K4), p0, p1, p2, p3),
    dotRow(c.r12, ldA(x + 12u * K4), p0, p1, p2, p3),
    dotRow(c.r13, ldA(x + 13u * K4), p0, p1, p2, p3),
    dotRow(c.r14, ldA(x + 14u * K4), p0, p1, p2, p3),
    dotRow(c.r15, ldA(x + 15u * K4), p0, p1, p2, p3));
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

// Blocks are numbered row-major (block row, then block column) and handed
// out in that order, 16 to a workgroup, so only the last workgroup has idle
// invocations: a 2-D grid of fixed 8×2 workgroups left whole SIMD groups
// idle where the block columns are not a multiple of 8 (N = 784: 25 block
// columns in 32 slots). The workgroup count may be folded into a 2-D grid
// (more than 65,535 workgroups); the block number runs across both.
@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  wideMain(gid, groups);
}
