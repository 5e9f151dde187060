// Elementwise activations, forward and backward. Backward takes the forward
// *input* x (not the output), so every activation has the same signature:
//   *_forward:  y[i] = f(x[i])
//   *_backward: dx[i] = dy[i] · f'(x[i])
// gelu_tanh is GELU's tanh approximation (as BERT/GPT-2 use it; the op
// geluTanh); the exact erf form is gelu.wgsl (the op gelu).

struct Dims { n: u32, _a: u32, _b: u32, _c: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;  // forward: output; backward: dy in, dx out (in place)

const SQRT_2_OVER_PI = 0.7978845608028654;
const GELU_C = 0.044715;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 256u; }

// tanh written via exp of a clamped argument: |u| > 15 is ±1 in f32 anyway,
// and clamping keeps exp() finite on every backend.
fn tanh_stable(u: f32) -> f32 {
  let e = exp(-2.0 * clamp(abs(u), 0.0, 15.0));
  return sign(u) * (1.0 - e) / (1.0 + e);
}

@compute @workgroup_size(256)
fn relu_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  y[i] = max(x[i], 0.0);
}

@compute @workgroup_size(256)
fn relu_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  y[i] = select(0.0, y[i], x[i] > 0.0);
}

@compute @workgroup_size(256)
fn tanh_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  y[i] = tanh_stable(x[i]);
}

@compute @workgroup_size(256)
fn tanh_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  let t = tanh_stable(x[i]);
  y[i] = y[i] * (1.0 - t * t);
}

@compute @workgroup_size(256)
fn gelu_tanh_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  let v = x[i];
  y[i] = 0.5 * v * (1.0 + tanh_stable(SQRT_2_OVER_PI * (v + GELU_C * v * v * v)));
}

@compute @workgroup_size(256)
fn gelu_tanh_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  let v = x[i];
  let t = tanh_stable(SQRT_2_OVER_PI * (v + GELU_C * v * v * v));
  let dt = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * v * v);
  y[i] = y[i] * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * dt);
}
