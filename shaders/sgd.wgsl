// SGD with momentum (PyTorch's form, L2 weight decay folded into the gradient):
//   g = grad + weightDecay · p
//   v = momentum · v + g
//   p = p − lr · v

struct Params { lr: f32, momentum: f32, weightDecay: f32 }

@group(0) @binding(0) var<uniform> hp: Params;
@group(0) @binding(1) var<storage, read_write> param: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> velocity: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 256u;
  // The bound range is the slice this dispatch updates (the whole buffer, or one binding's worth).
  if (i >= arrayLength(&grad)) { return; }
  let g = grad[i] + hp.weightDecay * param[i];
  let v = hp.momentum * velocity[i] + g;
  velocity[i] = v;
  param[i] = param[i] - hp.lr * v;
}
