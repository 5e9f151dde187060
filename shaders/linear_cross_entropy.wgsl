// Cross-entropy over one chunk of rows of the output head's logits (src/nn/ops/linear-cross-entropy):
// the op computes logits = h·Wᵀ + b for R rows at a time into a chunk-sized buffer (matmul.wgsl and
// its siblings), and these two passes turn the chunk into what the loss and the gradients need, so
// the [rows × classes] logits are never whole. A target of −1 (or any class out of range) is ignored.
//   stats (forward):  per row, the largest logit m and Σ exp(z − m) (kept for backward in `norm`),
//                     and [loss, counted, correct] (rowStats; the op sums them over all rows after
//                     the last chunk, reduce_rows.wgsl, then cross_entropy.wgsl's `total`)
//   grad (backward):  in place on the recomputed logits, dlogits = (softmax − onehot) / count · ∂loss,
//                     with count from the forward's result: what dh, dW and db are computed from.
// The arithmetic per row is cross_entropy.wgsl's (the same _softmax_row, the same formulas), so a chunk's
// loss terms and dlogits are those of the unfused loss for the same logits.

struct Dims { rows: u32, classes: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<i32>;
// [rows × 2]: the row's largest logit and Σ exp(z − max)
@group(0) @binding(3) var<storage, read_write> norm: array<f32>;
// [rows × 3]: loss, counted, correct
@group(0) @binding(4) var<storage, read_write> rowStats: array<f32>;
// [mean loss, correct, count] of the whole batch (forward's result)
@group(0) @binding(5) var<storage, read> result: array<f32>;
@group(0) @binding(6) var<storage, read> upstream: array<f32>;

// One workgroup per row, its GROUP invocations striding over the classes: the reductions are
// _softmax_row's, the ones cross_entropy.wgsl's `rows` uses.
// #import _group_reduce
// #import _softmax_row

fn rowOf(wid: vec3<u32>, groups: vec3<u32>) -> u32 { return wid.x + wid.y * groups.x; }

fn labelOf(r: u32) -> i32 {
  let t = targets[r];
  return select(t, -1, t < 0 || u32(t) >= dims.classes);
}

@compute @workgroup_size(GROUP)
fn stats(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = rowOf(wid, groups);
  if (r >= dims.rows) { return; } // the whole workgroup: r is the same for its threads
  let base = r * dims.classes;
  let t = labelOf(r);
  let ignored = t < 0;
  let label = select(u32(t), 0u, ignored);
  let row = softmaxRow(base, lid);
  let m = row.zmax;
  let argmax = row.argmax;
  let sum = row.sum;
  if (lid == 0u) {
    norm[2u * r] = m;
    norm[2u * r + 1u] = sum;
    rowStats[3u * r] = select(log(sum) - (logits[base + label] - m), 0.0, ignored);
    rowStats[3u * r + 1u] = select(1.0, 0.0, ignored);
    rowStats[3u * r + 2u] = select(select(0.0, 1.0, argmax == label), 0.0, ignored);
  }
}

@compute @workgroup_size(GROUP)
fn grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = rowOf(wid, groups);
  if (r >= dims.rows) { return; }
  let base = r * dims.classes;
  let t = labelOf(r);
  let ignored = t < 0;
  let label = select(u32(t), 0u, ignored);
  let m = norm[2u * r];
  let inv = 1.0 / norm[2u * r + 1u];
  // The unfused loss scales by 1/count, then by ∂loss: the same two roundings.
  var g = 1.0 / max(result[2], 1.0);
  g *= upstream[0];
  for (var j = lid; j < dims.classes; j += GROUP) {
    let d = select(exp(logits[base + j] - m) * inv - select(0.0, 1.0, j == label), 0.0, ignored);
    logits[base + j] = d * g;
  }
}
