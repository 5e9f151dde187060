// dst[i] = alpha · dst[i] over n floats. (Its own file: it binds no input vector.)

struct Dims { n: u32, alpha: f32, _a: u32, _b: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= dims.n) { return; }
  dst[i] = dims.alpha * dst[i];
}
