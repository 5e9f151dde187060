// Elementwise vector ops over n floats (for reductions and gradient averaging):
//   add:   dst[i] = a[i] + dst[i]
//   scale: dst[i] = alpha · dst[i]
//   axpy:  dst[i] = alpha · a[i] + dst[i]

struct Dims { n: u32, alpha: f32, _a: u32, _b: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 256u; }

@compute @workgroup_size(256)
fn add(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  dst[i] = a[i] + dst[i];
}

@compute @workgroup_size(256)
fn axpy(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  dst[i] = dims.alpha * a[i] + dst[i];
}
