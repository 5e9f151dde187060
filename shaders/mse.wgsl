// Mean squared error over n values: loss = Σ (pred − target)² / n (PyTorch's
// mse_loss with reduction='mean').
//   forward:  one workgroup (deterministic), result[outIndex] = loss
//   backward: dpred = gradScale · 2 (pred − target) / n  (· upstream[0] with HAS_UPSTREAM)

struct Dims { n: u32, outIndex: u32, gradScale: f32, _pad: u32 }

override ACCUMULATE: bool = false;
override HAS_UPSTREAM: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> pred: array<f32>;
@group(0) @binding(2) var<storage, read> expected: array<f32>;
@group(0) @binding(3) var<storage, read_write> result: array<f32>;
@group(0) @binding(4) var<storage, read_write> dpred: array<f32>;
@group(0) @binding(5) var<storage, read> upstream: array<f32>;

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn forward(@builtin(local_invocation_index) t: u32) {
  var s = 0.0;
  for (var i = t; i < dims.n; i += 256u) { let d = pred[i] - expected[i]; s += d * d; }
  partial[t] = s;
  workgroupBarrier();
  for (var stride = 128u; stride > 0u; stride /= 2u) {
    if (t < stride) { partial[t] += partial[t + stride]; }
    workgroupBarrier();
  }
  if (t == 0u) { result[dims.outIndex] = partial[0] / f32(dims.n); }
}

@compute @workgroup_size(256)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= dims.n) { return; }
  var d = dims.gradScale * 2.0 * (pred[i] - expected[i]) / f32(dims.n);
  if (HAS_UPSTREAM) { d *= upstream[0]; }
  if (ACCUMULATE) { dpred[i] += d; } else { dpred[i] = d; }
}
