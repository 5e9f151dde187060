// Log-softmax + cross-entropy over row-major logits [positions × classes]
// with integer targets; a target of −1 (or any negative) is ignored: it adds
// no loss, gets a zero gradient and is not counted in the mean, as PyTorch's
// cross_entropy(ignore_index=-1). The mean over counted positions needs their
// count, which only the GPU knows without a read-back, so three passes:
//   rows:   per position: loss, counted (0/1), correct (argmax == target),
//           and dlogits = softmax − onehot (unscaled; 0 when ignored)
//   (sums) reduce_rows.wgsl sums rowStats' columns over the positions in a
//           fixed order into result[outIndex ..+3] = [Σ loss, count, Σ correct]
//   total:  one invocation: result = [Σ loss / count, Σ correct, count]
//   scale:  dlogits *= gradScale / count  (· upstream[0] with HAS_UPSTREAM: the
//           loss's own gradient when it is an op inside a larger graph)
// (count 0, a batch of padding only, gives loss 0 and zero gradients, never NaN.)

struct Dims { positions: u32, classes: u32, gradScale: f32, outIndex: u32 }

override HAS_UPSTREAM: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<i32>;
@group(0) @binding(3) var<storage, read_write> dlogits: array<f32>;
// [positions × 3]: loss, counted, correct
@group(0) @binding(4) var<storage, read_write> rowStats: array<f32>;
@group(0) @binding(5) var<storage, read_write> result: array<f32>;
@group(0) @binding(6) var<storage, read> upstream: array<f32>;

fn index(gid: vec3<u32>, groups: vec3<u32>, wg: u32) -> u32 { return gid.x + gid.y * groups.x * wg; }

@compute @workgroup_size(64)
fn rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = index(gid, groups, 64u);
  if (r >= dims.positions) { return; }
  let base = r * dims.classes;
  let t = targets[r];
  if (t < 0 || u32(t) >= dims.classes) {
    for (var j = 0u; j < dims.classes; j++) { dlogits[base + j] = 0.0; }
    rowStats[3u * r] = 0.0;
    rowStats[3u * r + 1u] = 0.0;
    rowStats[3u * r + 2u] = 0.0;
    return;
  }
  let label = u32(t);
  var zmax = logits[base];
  var best = 0u;
  for (var j = 1u; j < dims.classes; j++) {
    let z = logits[base + j];
    if (z > zmax) { zmax = z; best = j; }
  }
  var sum = 0.0;
  for (var j = 0u; j < dims.classes; j++) { sum += exp(logits[base + j] - zmax); }
  rowStats[3u * r] = log(sum) - (logits[base + label] - zmax);
  rowStats[3u * r + 1u] = 1.0;
  rowStats[3u * r + 2u] = select(0.0, 1.0, best == label);
  let inv = 1.0 / sum;
  for (var j = 0u; j < dims.classes; j++) {
    dlogits[base + j] = exp(logits[base + j] - zmax) * inv - select(0.0, 1.0, j == label);
  }
}

@compute @workgroup_size(1)
fn total() {
  let p = vec3<f32>(result[dims.outIndex], result[dims.outIndex + 1u], result[dims.outIndex + 2u]);
  result[dims.outIndex] = p.x / max(p.y, 1.0);
  result[dims.outIndex + 1u] = p.z;
  result[dims.outIndex + 2u] = p.y;
}

@compute @workgroup_size(256)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups, 256u);
  if (i >= dims.positions * dims.classes) { return; }
  var g = dims.gradScale / max(result[dims.outIndex + 2u], 1.0);
  if (HAS_UPSTREAM) { g *= upstream[0]; }
  dlogits[i] *= g;
}
