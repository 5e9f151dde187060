// AdamW (decoupled weight decay, Loshchilov & Hutter):
//   m = β1·m + (1−β1)·g ;  v = β2·v + (1−β2)·g²
//   p = p − lr · ( m/bc1 / (sqrt(v/bc2) + ε) + weightDecay · p )
// bc1 = 1−β1^t and bc2 = 1−β2^t are computed on the CPU for step t.

struct Params { lr: f32, beta1: f32, beta2: f32, eps: f32, weightDecay: f32, bc1: f32, bc2: f32 }

@group(0) @binding(0) var<uniform> hp: Params;
@group(0) @binding(1) var<storage, read_write> param: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> m1: array<f32>;
@group(0) @binding(4) var<storage, read_write> m2: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 256u;
  // The bound range is the slice this dispatch updates (the whole buffer, or one binding's worth).
  if (i >= arrayLength(&grad)) { return; }
  let g = grad[i];
  let m = hp.beta1 * m1[i] + (1.0 - hp.beta1) * g;
  let v = hp.beta2 * m2[i] + (1.0 - hp.beta2) * g * g;
  m1[i] = m;
  m2[i] = v;
  let p = param[i];
  param[i] = p - hp.lr * ((m / hp.bc1) / (sqrt(v / hp.bc2) + hp.eps) + hp.weightDecay * p);
}
