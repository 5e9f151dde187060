// conv2d gradients wrt the weights and the bias (stride 1, zero padding,
// NCHW activations, OIHW weights), summed over the batch:
//
//   dw[co,ci,ky,kx] = sum over n, oy, ox of dy[n,co,oy,ox] * x[n,ci,oy+ky-pad,ox+kx-pad]
//   db[co]          = sum over n, oy, ox of dy[n,co,oy,ox]
//
// Long reductions into few outputs. One workgroup owns one kernel row
// (co, ci, ky), i.e. kw <= 8 weights; the last cout workgroups own the
// biases. The 64 threads split the output rows into segments of 8 pixels:
// per segment a thread loads 8 dy values and the 15 inputs under them once
// into vector registers and adds two 4-wide dot products per tap kx (the
// inputs shifted by kx) to that tap's sum. Then the threads' sums are added
// in workgroup memory. The eight tap sums are named variables, not an array:
// software adapters keep indexed arrays in memory, which was 1.6x slower.

struct Params {
  n: u32, cin: u32, h: u32, w: u32,
  cout: u32, kh: u32, kw: u32, pad_y: u32,
  pad_x: u32, oh: u32, ow: u32, _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dweight: array<f32>;
@group(0) @binding(4) var<storage, read_write> dbias: array<f32>;

const WG: u32 = 64u;
const SEG: u32 = 8u; // output pixels per segment

var<workgroup> partial: array<f32, 512>; // 8 taps x WG threads, tap-major

// x[row + ix], or 0 in the padding. `&`, not `&&`: short-circuit operators
// become branches, and SwiftShader took minutes to compile these.
fn load_x(row: u32, row_ok: bool, ix: i32) -> f32 {
  let ok = row_ok & (ix >= 0) & (ix < i32(p.w));
  return select(0.0, x[row + u32(clamp(ix, 0, i32(p.w) - 1))], ok);
}

// dy[grow + ox], or 0 past the end of the row.
fn load_dy(grow: u32, ox: u32) -> f32 {
  return select(0.0, dy[grow + min(ox, p.ow - 1u)], ox < p.ow);
}

fn shift1(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return vec4<f32>(a.yzw, b.x); }
fn shift2(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return vec4<f32>(a.zw, b.xy); }
fn shift3(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return vec4<f32>(a.w, b.xyz); }

@compute @workgroup_size(64)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) groups: vec3<u32>,
  @builtin(local_invocation_index) t: u32,
) {
  // Rows are folded into 2-D when there are more than 65535 workgroups.
  let row_id = wid.x + wid.y * groups.x;
  let rows = p.cout * p.cin * p.kh;
  let is_bias = row_id >= rows;
  let ky = row_id % p.kh;
  let ci = (row_id / p.kh) % p.cin;
  let co = select(row_id / (p.kh * p.cin), row_id - rows, is_bias);
  let segs_x = (p.ow + SEG - 1u) / SEG;
  let segs = select(p.n * p.oh * segs_x, 0u, row_id >= rows + p.cout);

  var c0 = 0.0; var c1 = 0.0; var c2 = 0.0; var c3 = 0.0;
  var c4 = 0.0; var c5 = 0.0; var c6 = 0.0; var c7 = 0.0;
  for (var s = t; s < segs; s += WG) {
    let ox0 = (s % segs_x) * SEG;
    let oy = (s / segs_x) % p.oh;
    let n = s / (segs_x * p.oh);
    let grow = ((n * p.cout + co) * p.oh + oy) * p.ow;
    let g0 = vec4<f32>(load_dy(grow, ox0), load_dy(grow, ox0 + 1u), load_dy(grow, ox0 + 2u), load_dy(grow, ox0 + 3u));
    let g1 = vec4<f32>(load_dy(grow, ox0 + 4u), load_dy(grow, ox0 + 5u), load_dy(grow, ox0 + 6u), load_dy(grow, ox0 + 7u));
    if (is_bias) {
      c0 += dot(g0, vec4<f32>(1.0)) + dot(g1, vec4<f32>(1.0));
      continue;
    }
    let iy = i32(oy + ky) - i32(p.pad_y);
    let row_ok = (iy >= 0) & (iy < i32(p.h));
    let row = ((n * p.cin + ci) * p.h + u32(clamp(iy, 0, i32(p.h) - 1))) * p.w;
    let ix0 = i32(ox0) - i32(p.pad_x);
    let x0 = vec4<f32>(load_x(row, row_ok, ix0), load_x(row, row_ok, ix0 + 1), load_x(row, row_ok, ix0 + 2), load_x(row, row_ok, ix0 + 3));
    let x1 = vec4<f32>(load_x(row, row_ok, ix0 + 4), load_x(row, row_ok, ix0 + 5), load_x(row, row_ok, ix0 + 6), load_x(row, row_ok, ix0 + 7));
    let x2 = vec4<f32>(load_x(row, row_ok, ix0 + 8), load_x(row, row_ok, ix0 + 9), load_x(row, row_ok, ix0 + 10), load_x(row, row_ok, ix0 + 11));
    let x3 = vec4<f32>(load_x(row, row_ok, ix0 + 12), load_x(row, row_ok, ix0 + 13), load_x(row, row_ok, ix0 + 14), 0.0);
    c0 += dot(g0, x0) + dot(g1, x1);
    c1 += dot(g0, shift1(x0, x1)) + dot(g1, shift1(x1, x2));
    c2 += dot(g0, shift2(x0, x1)) + dot(g1, shift2(x1, x2));
    c3 += dot(g0, shift3(x0, x1)) + dot(g1, shift3(x1, x2));
    c4 += dot(g0, x1) + dot(g1, x2);
    c5 += dot(g0, shift1(x1, x2)) + dot(g1, shift1(x2, x3));
    c6 += dot(g0, shift2(x1, x2)) + dot(g1, shift2(x2, x3));
    c7 += dot(g0, shift3(x1, x2)) + dot(g1, shift3(x2, x3));
  }
  partial[t] = c0; partial[WG + t] = c1; partial[2u * WG + t] = c2; partial[3u * WG + t] = c3;
  partial[4u * WG + t] = c4; partial[5u * WG + t] = c5; partial[6u * WG + t] = c6; partial[7u * WG + t] = c7;
  workgroupBarrier();
  let outputs = select(p.kw, 1u, is_bias);
  if (t < outputs && row_id < rows + p.cout) {
    var sum = 0.0;
    for (var q = 0u; q < WG; q++) { sum += partial[t * WG + q]; }
    if (is_bias) { dbias[co] = sum; } else { dweight[row_id * p.kw + t] = sum; }
  }
}
