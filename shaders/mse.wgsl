// Mean squared error over n values: loss = Σ (pred − target)² / n (PyTorch's
// mse_loss with reduction='mean').
//   forward:  workgroup w sums (pred − target)² over values [w·1024, (w+1)·1024) in a fixed
//             order; one workgroup writes result[outIndex] = loss, several write partial
//             sums result[w] that reduce_rows.wgsl adds up (deterministic, grows with n)
//   backward: dpred = gradScale · 2 (pred − target) / n  (· upstream[0] with HAS_UPSTREAM)

struct Dims { n: u32, outIndex: u32, gradScale: f32, _pad: u32 }

override ACCUMULATE: bool = false;
// forward: write the workgroup's sum to result[w] (several workgroups) instead of the mean.
override PARTIAL: bool = false;
override HAS_UPSTREAM: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> pred: array<f32>;
@group(0) @binding(2) var<storage, read> expected: array<f32>;
@group(0) @binding(3) var<storage, read_write> result: array<f32>;
@group(0) @binding(4) var<storage, read_write> dpred: array<f32>;
@group(0) @binding(5) var<storage, read> upstream: array<f32>;

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn forward(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let w = wid.x + wid.y * groups.x;
  var s = 0.0;
  let end = min(dims.n, (w + 1u) * 1024u);
  for (var i = w * 1024u + t; i < end; i += 256u) { let d = pred[i] - expected[i]; s += d * d; }
  partial[t] = s;
  workgroupBarrier();
  for (var stride = 128u; stride > 0u; stride /= 2u) {
    if (t < stride) { partial[t] += partial[t + stride]; }
    workgroupBarrier();
  }
  if (t == 0u) {
    if (PARTIAL) { result[w] = partial[0]; } else { result[dims.outIndex] = partial[0] / f32(dims.n); }
  }
}

@compute @workgroup_size(256)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= dims.n) { return; }
  var d = dims.gradScale * 2.0 * (pred[i] - expected[i]) / f32(dims.n);
  if (HAS_UPSTREAM) { d *= upstream[0]; }
  if (ACCUMULATE) { dpred[i] += d; } else { dpred[i] = d; }
}
