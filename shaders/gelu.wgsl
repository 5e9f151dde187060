// GELU, the exact form PyTorch's nn.GELU() uses by default (not the tanh
// approximation in activation.wgsl):
//   forward:  y = x · Φ(x),            Φ(x) = ½ · erfc(−x / √2)
//   backward: dx = dy · (Φ(x) + x · φ(x)),  φ(x) = exp(−x² / 2) / √(2π)
// WGSL has no erf. erfc(z) for z ≥ 0 comes from a Chebyshev-fitted rational
// exponent (Numerical Recipes' erfcc; fractional error below 1.2e-7 for every
// z), and erfc(−z) = 2 − erfc(z). Working on erfc keeps Φ accurate in the far
// negative tail, where 1 + erf(x/√2) would cancel to zero.

struct Dims { n: u32, _a: u32, _b: u32, _c: u32 }

override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;

const INV_SQRT_2 = 0.7071067811865476;
const INV_SQRT_2PI = 0.3989422804014327;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 256u; }

fn erfc_nonneg(z: f32) -> f32 {
  let t = 1.0 / (1.0 + 0.5 * z);
  let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
          t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  // z² beyond ~104 underflows exp to 0 anyway; the clamp keeps z·z finite.
  let zc = min(z, 20.0);
  return t * exp(-zc * zc + p);
}

// Φ(x) = ½ erfc(−x/√2)
fn normal_cdf(v: f32) -> f32 {
  let z = -v * INV_SQRT_2;
  if (z >= 0.0) { return 0.5 * erfc_nonneg(z); }
  return 1.0 - 0.5 * erfc_nonneg(-z);
}

@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  let v = x[i];
  y[i] = v * normal_cdf(v);
}

@compute @workgroup_size(256)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  let v = x[i];
  let vc = clamp(v, -20.0, 20.0);
  let d = dy[i] * (normal_cdf(v) + v * INV_SQRT_2PI * exp(-0.5 * vc * vc));
  if (ACCUMULATE) { dx[i] += d; } else { dx[i] = d; }
}
