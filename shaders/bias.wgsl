// Bias for row-major [rows × cols] activations.
//   add_bias:  Y[r, c] += bias[c]            (one invocation per element)
//   bias_grad: dBias[c] = Σ_r dY[r, c]        (one invocation per column; rows summed in order)
// bias_grad walks every row in one invocation, so its workgroups do not grow
// with the rows; the ops sum bias gradients with reduce_rows.wgsl instead.

struct Dims { rows: u32, cols: u32, _a: u32, _b: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

// add_bias: src = bias (cols), dst = Y (rows × cols), in place.
@compute @workgroup_size(256)
fn add_bias(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= dims.rows * dims.cols) { return; }
  dst[i] += src[i % dims.cols];
}

// bias_grad: src = dY (rows × cols), dst = dBias (cols).
@compute @workgroup_size(64)
fn bias_grad(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = gid.x;
  if (c >= dims.cols) { return; }
  var s = 0.0;
  for (var r = 0u; r < dims.rows; r++) { s += src[r * dims.cols + c]; }
  dst[c] = s;
}
