// Softmax cross-entropy over row-major logits [batch × classes], one
// invocation per row. Numerically stable: subtract the row max before exp.
//   lossRows[r] = log Σ_j exp(z_j − max) − (z_label − max)
//   correct[r]  = 1 if argmax(z) == label (first max wins) else 0
//   dLogits[r, j] = (softmax_j − [j == label]) · gradScale
// gradScale is 1/batch, so gradients are those of the MEAN loss.

struct Dims { batch: u32, classes: u32, gradScale: f32, _pad: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> labels: array<u32>;
@group(0) @binding(3) var<storage, read_write> dLogits: array<f32>;
@group(0) @binding(4) var<storage, read_write> lossRows: array<f32>;
@group(0) @binding(5) var<storage, read_write> correct: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = gid.x;
  if (r >= dims.batch) { return; }
  let base = r * dims.classes;
  let label = labels[r];
  var zmax = logits[base];
  var best = 0u;
  for (var j = 1u; j < dims.classes; j++) {
    let z = logits[base + j];
    if (z > zmax) { zmax = z; best = j; }
  }
  var sum = 0.0;
  for (var j = 0u; j < dims.classes; j++) { sum += exp(logits[base + j] - zmax); }
  lossRows[r] = log(sum) - (logits[base + label] - zmax);
  correct[r] = select(0.0, 1.0, best == label);
  let inv = 1.0 / sum;
  for (var j = 0u; j < dims.classes; j++) {
    let p = exp(logits[base + j] - zmax) * inv;
    dLogits[base + j] = (p - select(0.0, 1.0, j == label)) * dims.gradScale;
  }
}
