// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"), decoupled weight decay:
//   c = β1·m + (1−β1)·g
//   p = p − lr · ( sign(c) + weightDecay · p )
//   m = β2·m + (1−β2)·g
// The update's size is lr in every coordinate (sign), so Lion takes a smaller lr than AdamW.

struct Params { lr: f32, beta1: f32, beta2: f32, weightDecay: f32 }

@group(0) @binding(0) var<uniform> hp: Params;
@group(0) @binding(1) var<storage, read_write> param: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 256u;
  // The bound range is the slice this dispatch updates (the whole buffer, or one binding's worth).
  if (i >= arrayLength(&grad)) { return; }
  let g = grad[i];
  let c = hp.beta1 * m[i] + (1.0 - hp.beta1) * g;
  let p = param[i];
  param[i] = p - hp.lr * (sign(c) + hp.weightDecay * p);
  m[i] = hp.beta2 * m[i] + (1.0 - hp.beta2) * g;
}
