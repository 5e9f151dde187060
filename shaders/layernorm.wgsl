// Layer norm over the last dimension of row-major x [rows × cols]:
//   y = (x − mean) · rstd · weight + bias,  rstd = 1 / sqrt(var + eps)  (biased variance, as PyTorch)
// forward saves (mean, rstd) per row in `stats` [rows × 2] for backward.
//   backward_input:  dx = rstd · (g − mean(g) − x̂ · mean(g · x̂)),  g = dy · weight,  x̂ = (x − mean) · rstd
//   backward_params: per chunk j of `chunk` rows, dweight[j·cols + c] = Σ_r dy · x̂ and
//                    dbias[j·cols + c] = Σ_r dy (rows summed in order: deterministic). With
//                    one chunk these are the gradients; with several, per-chunk partials
//                    that reduce_rows.wgsl sums in order, so the workgroups grow with the rows.
// One invocation per row (per chunk and column for the parameter gradients):
// rows are short in the models this serves (width 64–1024).
// forward_rows and backward_input_rows are forward and backward_input with one workgroup per row, its
// GROUP invocations striding over the columns and summing with _group_reduce: what a Gpu with subgroups
// plans, compiled `layernorm+subgroups` (docs/KERNELS.md, "Subgroups").

struct Dims { rows: u32, cols: u32, eps: f32, chunk: u32 }

// true: backward adds into dx / dweight / dbias (a tensor used twice) instead of overwriting.
override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> stats: array<f32>;
@group(0) @binding(6) var<storage, read> dy: array<f32>;
@group(0) @binding(7) var<storage, read> saved: array<f32>;
@group(0) @binding(8) var<storage, read_write> dx: array<f32>;
@group(0) @binding(9) var<storage, read_write> dweight: array<f32>;
@group(0) @binding(10) var<storage, read_write> dbias: array<f32>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = index(gid, groups);
  if (r >= dims.rows) { return; }
  let base = r * dims.cols;
  let inv = 1.0 / f32(dims.cols);
  var s = 0.0;
  for (var c = 0u; c < dims.cols; c++) { s += x[base + c]; }
  let mean = s * inv;
  // Two passes: the variance of centred values does not cancel catastrophically.
  var v = 0.0;
  for (var c = 0u; c < dims.cols; c++) { let d = x[base + c] - mean; v += d * d; }
  let rstd = 1.0 / sqrt(v * inv + dims.eps);
  for (var c = 0u; c < dims.cols; c++) { y[base + c] = (x[base + c] - mean) * rstd * weight[c] + bias[c]; }
  stats[2u * r] = mean;
  stats[2u * r + 1u] = rstd;
}

@compute @workgroup_size(64)
fn backward_input(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = index(gid, groups);
  if (r >= dims.rows) { return; }
  let base = r * dims.cols;
  let mean = saved[2u * r];
  let rstd = saved[2u * r + 1u];
  var sg = 0.0;
  var sgx = 0.0;
  for (var c = 0u; c < dims.cols; c++) {
    let g = dy[base + c] * weight[c];
    sg += g;
    sgx += g * (x[base + c] - mean) * rstd;
  }
  let inv = 1.0 / f32(dims.cols);
  for (var c = 0u; c < dims.cols; c++) {
    let xhat = (x[base + c] - mean) * rstd;
    let d = rstd * (dy[base + c] * weight[c] - sg * inv - xhat * sgx * inv);
    if (ACCUMULATE) { dx[base + c] += d; } else { dx[base + c] = d; }
  }
}

@compute @workgroup_size(64)
fn backward_params(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  let chunks = (dims.rows + dims.chunk - 1u) / dims.chunk;
  if (i >= chunks * dims.cols) { return; }
  let c = i % dims.cols;
  let r0 = (i / dims.cols) * dims.chunk;
  let r1 = min(dims.rows, r0 + dims.chunk);
  var sw = 0.0;
  var sb = 0.0;
  for (var r = r0; r < r1; r++) {
    let g = dy[r * dims.cols + c];
    sw += g * (x[r * dims.cols + c] - saved[2u * r]) * saved[2u * r + 1u];
    sb += g;
  }
  if (ACCUMULATE) { dweight[i] += sw; dbias[i] += sb; } else { dweight[i] = sw; dbias[i] = sb; }
}

// #import _group_reduce

fn rowIndex(wid: vec3<u32>, groups: vec3<u32>) -> u32 { return wid.x + wid.y * groups.x; }

@compute @workgroup_size(GROUP)
fn forward_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = rowIndex(wid, groups);
  if (r >= dims.rows) { return; } // the whole workgroup
  let base = r * dims.cols;
  let inv = 1.0 / f32(dims.cols);
  var s = 0.0;
  for (var c = lid; c < dims.cols; c += GROUP) { s += x[base + c]; }
  let mean = groupSum(lid, s) * inv;
  var v = 0.0;
  for (var c = lid; c < dims.cols; c += GROUP) { let d = x[base + c] - mean; v += d * d; }
  let rstd = 1.0 / sqrt(groupSum(lid, v) * inv + dims.eps);
  for (var c = lid; c < dims.cols; c += GROUP) { y[base + c] = (x[base + c] - mean) * rstd * weight[c] + bias[c]; }
  if (lid == 0u) {
    stats[2u * r] = mean;
    stats[2u * r + 1u] = rstd;
  }
}

@compute @workgroup_size(GROUP)
fn backward_input_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = rowIndex(wid, groups);
  if (r >= dims.rows) { return; }
  let base = r * dims.cols;
  let mean = saved[2u * r];
  let rstd = saved[2u * r + 1u];
  var part = vec2<f32>(0.0);
  for (var c = lid; c < dims.cols; c += GROUP) {
    let g = dy[base + c] * weight[c];
    part += vec2<f32>(g, g * (x[base + c] - mean) * rstd);
  }
  let sums = groupSum2(lid, part);
  let inv = 1.0 / f32(dims.cols);
  for (var c = lid; c < dims.cols; c += GROUP) {
    let xhat = (x[base + c] - mean) * rstd;
    let d = rstd * (dy[base + c] * weight[c] - sums.x * inv - xhat * sums.y * inv);
    if (ACCUMULATE) { dx[base + c] += d; } else { dx[base + c] = d; }
  }
}
