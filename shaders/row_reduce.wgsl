// Reductions over the last dimension of a [rows, cols] view, one invocation
// per row (rows in parallel; each row summed in column order, so results are
// the same bits on every run and adapter):
//   mean: y[r] = Σ_c x[r,c] / cols;   dx[r,c] = dy[r] / cols
//   max:  y[r] = max_c x[r,c];        dx[r,c] = dy[r] at the row's first maximum, else 0
// max's backward finds the maximum again from x instead of saving its index:
// one more pass over the row, and no scratch buffer to plan.
// mean_forward_rows, max_forward_rows, max_backward_rows: the same with one workgroup per row, its GROUP
// invocations striding over the columns and reducing with _group_reduce: what a Gpu with subgroups
// plans (`row_reduce+subgroups`). (mean_backward reduces nothing and serves both.)

struct Dims { rows: u32, cols: u32, _a: u32, _b: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;

fn row_of(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

fn argmax(r: u32) -> u32 {
  let base = r * dims.cols;
  var best = 0u;
  for (var c = 1u; c < dims.cols; c++) {
    if (x[base + c] > x[base + best]) { best = c; }
  }
  return best;
}

@compute @workgroup_size(64)
fn mean_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = row_of(gid, groups);
  if (r >= dims.rows) { return; }
  let base = r * dims.cols;
  var s = 0.0;
  for (var c = 0u; c < dims.cols; c++) { s += x[base + c]; }
  y[r] = s / f32(dims.cols);
}

@compute @workgroup_size(64)
fn mean_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = row_of(gid, groups);
  if (r >= dims.rows) { return; }
  let g = dy[r] / f32(dims.cols);
  for (var c = 0u; c < dims.cols; c++) { dx[r * dims.cols + c] = g; }
}

@compute @workgroup_size(64)
fn max_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = row_of(gid, groups);
  if (r >= dims.rows) { return; }
  y[r] = x[r * dims.cols + argmax(r)];
}

@compute @workgroup_size(64)
fn max_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = row_of(gid, groups);
  if (r >= dims.rows) { return; }
  let best = argmax(r);
  for (var c = 0u; c < dims.cols; c++) { dx[r * dims.cols + c] = select(0.0, dy[r], c == best); }
}

// #import _group_reduce

fn rowIndex(wid: vec3<u32>, groups: vec3<u32>) -> u32 { return wid.x + wid.y * groups.x; }

// The row's first maximum, as argmax() finds it: each invocation's first maximum of its columns, then
// the largest value at the smallest column. A row of values no greater than NO_VALUE (-inf) gives 0.
fn groupArgmax(r: u32, lid: u32) -> u32 {
  let base = r * dims.cols;
  var z = NO_VALUE;
  var at = NO_INDEX;
  for (var c = lid; c < dims.cols; c += GROUP) {
    if (x[base + c] > z) { z = x[base + c]; at = c; }
  }
  let top = groupMaxArg(lid, z, at);
  return select(top.index, 0u, top.index == NO_INDEX);
}

@compute @workgroup_size(GROUP)
fn mean_forward_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = rowIndex(wid, groups);
  if (r >= dims.rows) { return; } // the whole workgroup
  var s = 0.0;
  for (var c = lid; c < dims.cols; c += GROUP) { s += x[r * dims.cols + c]; }
  let total = groupSum(lid, s);
  if (lid == 0u) { y[r] = total / f32(dims.cols); }
}

@compute @workgroup_size(GROUP)
fn max_forward_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = rowIndex(wid, groups);
  if (r >= dims.rows) { return; }
  let best = groupArgmax(r, lid);
  if (lid == 0u) { y[r] = x[r * dims.cols + best]; }
}

@compute @workgroup_size(GROUP)
fn max_backward_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = rowIndex(wid, groups);
  if (r >= dims.rows) { return; }
  let best = groupArgmax(r, lid);
  for (var c = lid; c < dims.cols; c += GROUP) { dx[r * dims.cols + c] = select(0.0, dy[r], c == best); }
}
