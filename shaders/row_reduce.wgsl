// Reductions over the last dimension of a [rows, cols] view, one invocation
// per row (rows in parallel; each row summed in column order, so results are
// the same bits on every run and adapter):
//   mean: y[r] = Σ_c x[r,c] / cols;   dx[r,c] = dy[r] / cols
//   max:  y[r] = max_c x[r,c];        dx[r,c] = dy[r] at the row's first maximum, else 0
// max's backward finds the maximum again from x instead of saving its index:
// one more pass over the row, and no scratch buffer to plan.

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
