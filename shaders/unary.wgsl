// Pointwise primitives that other ops are composed of (RMSNorm, GELU variants),
// so that those need no WGSL of their own:
//   exp:    y = eˣ,              dx = dy · y
//   rsqrt:  y = 1 / √(x + ε),    dx = dy · (−½) · y³
// Backward reads the forward output y rather than x: both derivatives are
// cheapest from it, and y is kept for backward anyway.

struct Dims { n: u32, eps: f32, _b: u32, _c: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 256u; }

@compute @workgroup_size(256)
fn exp_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  y[i] = exp(x[i]);
}

@compute @workgroup_size(256)
fn exp_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  dx[i] = dy[i] * y[i];
}

@compute @workgroup_size(256)
fn rsqrt_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  // 1/sqrt rather than inverseSqrt: WGSL lets inverseSqrt be 2 ULP off, which the f64 oracle would see.
  y[i] = 1.0 / sqrt(x[i] + dims.eps);
}

@compute @workgroup_size(256)
fn rsqrt_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  let r = y[i];
  dx[i] = -0.5 * dy[i] * r * r * r;
}
