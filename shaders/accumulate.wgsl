// Gradient accumulation over micro-batches (src/gpu/kernels/accumulate.ts):
//   dst[i] = weights[pass] · src[i]            (the step's first pass: whatever dst held is dropped)
//   dst[i] = dst[i] + weights[pass] · src[i]   (every later pass)
// The weights live in a storage buffer written once per step (each pass's share of the step's
// counted targets), so the planned dispatches never change.

struct Dims { n: u32, pass_index: u32, first: u32, _a: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> weights: array<f32>;
@group(0) @binding(2) var<storage, read> src: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= dims.n) { return; }
  let part = weights[dims.pass_index] * src[i];
  // A select, not 0·dst: a first pass must drop a NaN left from an earlier step.
  dst[i] = select(dst[i] + part, part, dims.first == 1u);
}
