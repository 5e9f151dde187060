// f32 → f16 for the operands of f16-mixed matmuls (src/nn/ops/linear/f16-kernel.ts).
//   dst[i] = f16(src[i]) for i < n
// WGSL leaves the conversion of a value past f16's range (±65504) undefined, and
// dynamic loss scaling (src/engine/loss-scale.ts) must see every overflow to skip
// its step: such a value, or one that is not finite, sets flag[0] = 1 and is
// stored clamped (NaN as 0), so the result is the same on every adapter.

enable f16;

const F16_MAX: f32 = 65504.0;

struct Dims { n: u32, _a: u32, _b: u32, _c: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f16>;
@group(0) @binding(3) var<storage, read_write> flag: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= dims.n) { return; }
  let x = src[i];
  // By the bits: compilers may assume floats are finite and fold a NaN test away.
  let bits = bitcast<u32>(x);
  let nan = (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0u;
  let inf = (bits & 0x7fffffffu) == 0x7f800000u;
  if (nan || inf || abs(x) > F16_MAX) {
    atomicStore(&flag[0], 1u);
    dst[i] = f16(select(clamp(x, -F16_MAX, F16_MAX), 0.0, nan));
    return;
  }
  dst[i] = f16(x);
}
