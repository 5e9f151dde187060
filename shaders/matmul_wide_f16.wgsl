// matmul_wide.wgsl's 32×32 blocks (shaders/_matmul_wide.wgsl) with A and B
// stored as f16: C[M×N] = op(A)·op(B) (+ bias) (ReLU) for --precision
// f16-mixed on the CPU adapters (src/nn/ops/linear/kernel.ts). A vec4<f16> is
// one 8-byte load, where the f32 kernel's vec4 is 16 bytes; each is widened to
// f32 on load, and every product is summed in f32. C and the bias stay f32.
//
// The same bits as matmul_f16.wgsl: a product of two f16 values is exact in
// f32 (11 + 11 significant bits), so a fused multiply-add and a multiply then
// an add round alike, and every entry of C is its sum over k from 0 up, one k
// at a time, as there. Hence A·Bᵀ here is not the f32 kernel's dot products
// (which add 4 products before the accumulator): each step of 4 k loads one
// vec4 along k from each of the block's 32 B rows and transposes them into
// the 4×32 panel that A·B uses. Unsplit (KC = K) only, to keep that order.
//
// Needs what `wideFits` checks (src/gpu/kernels/matmul.ts).

enable f16;

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override HAS_BIAS: bool = false;
override RELU: bool = false;

struct Dims { M: u32, N: u32, K: u32, KC: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> A: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read> B: array<vec4<f16>>;
@group(0) @binding(3) var<storage, read_write> C: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bias: array<vec4<f32>>;

fn ldA(i: u32) -> vec4<f32> { return vec4<f32>(A[i]); }
fn ldB(i: u32) -> vec4<f32> { return vec4<f32>(B[i]); }

// #import _matmul_wide

// 4 columns j..j+3 of op(B) (B rows, stored N×K) at vec4 k4, as 4 vec4s along the columns, one per k.
fn quadT(j: u32, K4: u32, k4: u32) -> mat4x4<f32> {
  let at = j * K4 + k4;
  return transpose(mat4x4<f32>(ldB(at), ldB(at + K4), ldB(at + 2u * K4), ldB(at + 3u * K4)));
}

// The 4×32 panel of op(B) at vec4 k4 for the block's columns j..j+31: row k of it in `k0`..`k3`.
struct Panel { k0: Row, k1: Row, k2: Row, k3: Row }

fn panelT(j: u32, K4: u32, k4: u32) -> Panel {
  let t0 = quadT(j, K4, k4); let t1 = quadT(j + 4u, K4, k4);
  let t2 = quadT(j + 8u, K4, k4); let t3 = quadT(j + 12u, K4, k4);
  let t4 = quadT(j + 16u, K4, k4); let t5 = quadT(j + 20u, K4, k4);
  let t6 = quadT(j + 24u, K4, k4); let t7 = quadT(j + 28u, K4, k4);
  return Panel(Row(t0[0], t1[0], t2[0], t3[0], t4[0], t5[0], t6[0], t7[0]),
               Row(t0[1], t1[1], t2[1], t3[1], t4[1], t5[1], t6[1], t7[1]),
               Row(t0[2], t1[2], t2[2], t3[2], t4[2], t5[2], t6[2], t7[2]),
               Row(t0[3], t1[3], t2[3], t3[3], t4[3], t5[3], t6[3], t7[3]));
}

// A·Bᵀ (B stored N×K): per k4, the transposed panel and a vec4 along k from each of 32 A rows, as A·B.
fn blockNT(rs: u32, qs: u32, kb: u32, ke: u32) -> Block {
  let K4 = dims.K / 4u;
  let j = qs * 4u; // first column of the block = first B row
  var c: Block;
  for (var k4 = kb / 4u; k4 < ke / 4u; k4++) {
    let p = panelT(j, K4, k4);
    let x = rs * K4 + k4;
    c.top = halfNN(c.top, x, K4, p.k0, p.k1, p.k2, p.k3);
    c.bottom = halfNN(c.bottom, x + 16u * K4, K4, p.k0, p.k1, p.k2, p.k3);
  }
  return c;
}

@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  wideMain(gid, groups);
}
