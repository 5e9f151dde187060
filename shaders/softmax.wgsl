// Softmax over the last dimension of row-major [rows × cols], one invocation per row.
//   forward:  y = exp(x − max) / Σ exp(x − max)
//   backward: dx = y · (dy − Σ_j dy_j · y_j)   (from the saved output y)
// forward_rows and backward_rows: the same with one workgroup per row, its GROUP invocations striding
// over the columns and reducing with _group_reduce: what a Gpu with subgroups plans (`softmax+subgroups`).

struct Dims { rows: u32, cols: u32, _a: u32, _b: u32 }

override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> saved: array<f32>;
@group(0) @binding(4) var<storage, read> dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = index(gid, groups);
  if (r >= dims.rows) { return; }
  let base = r * dims.cols;
  var m = x[base];
  for (var c = 1u; c < dims.cols; c++) { m = max(m, x[base + c]); }
  var s = 0.0;
  for (var c = 0u; c < dims.cols; c++) { let e = exp(x[base + c] - m); y[base + c] = e; s += e; }
  let inv = 1.0 / s;
  for (var c = 0u; c < dims.cols; c++) { y[base + c] *= inv; }
}

@compute @workgroup_size(64)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = index(gid, groups);
  if (r >= dims.rows) { return; }
  let base = r * dims.cols;
  var dot = 0.0;
  for (var c = 0u; c < dims.cols; c++) { dot += dy[base + c] * saved[base + c]; }
  for (var c = 0u; c < dims.cols; c++) {
    let d = saved[base + c] * (dy[base + c] - dot);
    if (ACCUMULATE) { dx[base + c] += d; } else { dx[base + c] = d; }
  }
}

// #import _group_reduce

fn rowIndex(wid: vec3<u32>, groups: vec3<u32>) -> u32 { return wid.x + wid.y * groups.x; }

@compute @workgroup_size(GROUP)
fn forward_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = rowIndex(wid, groups);
  if (r >= dims.rows) { return; } // the whole workgroup
  let base = r * dims.cols;
  var m = NO_VALUE;
  for (var c = lid; c < dims.cols; c += GROUP) { m = max(m, x[base + c]); }
  let top = groupMaxArg(lid, m, 0u).value;
  var s = 0.0;
  for (var c = lid; c < dims.cols; c += GROUP) { let e = exp(x[base + c] - top); y[base + c] = e; s += e; }
  let inv = 1.0 / groupSum(lid, s);
  // Each invocation scales the columns it wrote itself: no barrier needed.
  for (var c = lid; c < dims.cols; c += GROUP) { y[base + c] *= inv; }
}

@compute @workgroup_size(GROUP)
fn backward_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = rowIndex(wid, groups);
  if (r >= dims.rows) { return; }
  let base = r * dims.cols;
  var part = 0.0;
  for (var c = lid; c < dims.cols; c += GROUP) { part += dy[base + c] * saved[base + c]; }
  let dot = groupSum(lid, part);
  for (var c = lid; c < dims.cols; c += GROUP) {
    let d = saved[base + c] * (dy[base + c] - dot);
    if (ACCUMULATE) { dx[base + c] += d; } else { dx[base + c] = d; }
  }
}
