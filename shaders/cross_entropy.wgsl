// Log-softmax + cross-entropy over row-major logits [positions × classes]
// with integer targets; a target of −1 (or any negative) is ignored: it adds
// no loss, gets a zero gradient and is not counted in the mean, as PyTorch's
// cross_entropy(ignore_index=-1). The mean over counted positions needs their
// count, which only the GPU knows without a read-back, so three passes:
//   rows:   per position (one workgroup each): loss, counted (0/1), correct
//           (argmax == target), and dlogits = softmax − onehot (unscaled; 0 when ignored)
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

// rows: one workgroup per position; its GROUP invocations stride over the classes and reduce with
// _group_reduce (a fixed tree in workgroup memory, or subgroup operations when compiled `+subgroups`).
// #import _group_reduce
// #import _softmax_row

@compute @workgroup_size(GROUP)
fn rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = wid.x + wid.y * groups.x;
  if (r >= dims.positions) { return; } // the whole workgroup: r is the same for its threads
  let base = r * dims.classes;
  let t = targets[r];
  let ignored = t < 0 || u32(t) >= dims.classes;
  let label = select(u32(t), 0u, ignored);
  // Passes 1 and 2: the largest logit and its first class, then Σ exp(z − max).
  let row = softmaxRow(base, lid);
  let m = row.zmax;
  let argmax = row.argmax;
  let sum = row.sum;
  // Pass 3: softmax − onehot, or 0 for an ignored position.
  let inv = 1.0 / sum;
  for (var j = lid; j < dims.classes; j += GROUP) {
    dlogits[base + j] = select(exp(logits[base + j] - m) * inv - select(0.0, 1.0, j == label), 0.0, ignored);
  }
  if (lid == 0u) {
    rowStats[3u * r] = select(log(sum) - (logits[base + label] - m), 0.0, ignored);
    rowStats[3u * r + 1u] = select(1.0, 0.0, ignored);
    rowStats[3u * r + 2u] = select(select(0.0, 1.0, argmax == label), 0.0, ignored);
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
