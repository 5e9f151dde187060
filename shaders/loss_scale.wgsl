// Dynamic loss scaling for --precision f16-mixed (src/engine/loss-scale.ts),
// over a range of one binding (the flat gradients go in slices):
//   seed:    values[i] *= scale[0]          the loss's gradient, before backward
//   unscale: values[i] *= scale[1]          (1 / scale) the parameters' gradients, after it;
//            a result that is inf or NaN sets flag[0] = 1 (the step is skipped)
// scale holds [S, 1/S], written by the CPU when S changes.

struct Dims { n: u32, _a: u32, _b: u32, _c: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> scale: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
@group(0) @binding(3) var<storage, read_write> flag: array<atomic<u32>>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 256u; }

@compute @workgroup_size(256)
fn seed(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  values[i] *= scale[0];
}

@compute @workgroup_size(256)
fn unscale(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  let g = values[i] * scale[1];
  values[i] = g;
  // By the bits: compilers may assume floats are finite and fold an isNaN test away.
  if ((bitcast<u32>(g) & 0x7f800000u) == 0x7f800000u) { atomicStore(&flag[0], 1u); }
}
