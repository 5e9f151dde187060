// matmul.wgsl's 64×64 workgroup tiles (shaders/_matmul_tiled.wgsl) with A and
// B stored as f16: C[M×N] = op(A)·op(B) (+ bias) (ReLU) for --precision
// f16-mixed on GPUs (src/nn/ops/linear/kernel.ts). The tiles in workgroup
// memory hold f16 (half the bytes of matmul.wgsl's), widened to f32 as they
// are read; the products are summed in f32, and C and the bias stay f32.
//
// The same bits as matmul_f16.wgsl and matmul_wide_f16.wgsl, unsplit: a
// product of two f16 values is exact in f32, and each entry of C is its sum
// over k from 0 up, one k at a time. Any shape; takes matmul.wgsl's strides
// (LDA, LDB, LDC, ZS: slices of a bigger matrix) and split over K (KC, ZS).

enable f16;

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override HAS_BIAS: bool = false;
override RELU: bool = false;

struct Dims { M: u32, N: u32, K: u32, KC: u32, LDA: u32, LDB: u32, LDC: u32, ZS: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> A: array<f16>;
@group(0) @binding(2) var<storage, read> B: array<f16>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;

alias Elem = f16;
alias Tile4 = vec4<f16>;

// #import _matmul_tiled

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  tiledMain(wg, lid, t);
}
