// conv2d gradients with respect to the weights and the bias (stride 1, zero
// padding, NCHW/OIHW), summed over the batch:
//   dw[co,ci,ky,kx] = sum over n, oy, ox of dy[n,co,oy,ox] * x[n,ci,oy+ky-pad,ox+kx-pad]
//   db[co]          = sum over n, oy, ox of dy[n,co,oy,ox]
// These are long reductions (n*oh*ow terms) into few outputs, so a workgroup
// owns one kernel row (co, ci, ky): its 64 threads split the positions, keep
// the kw taps of the row in registers, then add their partial sums in a tree.
// The last cout workgroups compute the bias gradient the same way, so one
// dispatch yields both.

struct Params {
  n: u32, cin: u32, h: u32, w: u32,
  cout: u32, kh: u32, kw: u32, pad: u32,
  oh: u32, ow: u32, _pad0: u32, _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dweight: array<f32>;
@group(0) @binding(4) var<storage, read_write> dbias: array<f32>;

const WG: u32 = 64u;
// Widest kernel row kept in registers; the host refuses wider kernels.
const MAX_KW: u32 = 11u;

var<workgroup> partial: array<f32, 704>; // WG * MAX_KW, tap-major

@compute @workgroup_size(64)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) groups: vec3<u32>,
  @builtin(local_invocation_index) t: u32,
) {
  // Rows are folded into 2-D when there are more than 65535 workgroups.
  let row = wid.x + wid.y * groups.x;
  let rows = p.cout * p.cin * p.kh;
  let positions = p.n * p.oh * p.ow;
  var acc: array<f32, MAX_KW>;
  if (row < rows) {
    let ky = row % p.kh;
    let ci = (row / p.kh) % p.cin;
    let co = row / (p.kh * p.cin);
    for (var q = t; q < positions; q += WG) {
      let ox = q % p.ow;
      let oy = (q / p.ow) % p.oh;
      let n = q / (p.ow * p.oh);
      let iy = i32(oy + ky) - i32(p.pad);
      if (iy < 0 || iy >= i32(p.h)) { continue; }
      let g = dy[((n * p.cout + co) * p.oh + oy) * p.ow + ox];
      let xrow = ((n * p.cin + ci) * p.h + u32(iy)) * p.w;
      for (var kx = 0u; kx < p.kw; kx++) {
        let ix = i32(ox + kx) - i32(p.pad);
        if (ix < 0 || ix >= i32(p.w)) { continue; }
        acc[kx] += g * x[xrow + u32(ix)];
      }
    }
  } else if (row < rows + p.cout) {
    let co = row - rows;
    let plane = p.oh * p.ow;
    for (var n = 0u; n < p.n; n++) {
      let base = (n * p.cout + co) * plane;
      for (var q = t; q < plane; q += WG) { acc[0] += dy[base + q]; }
    }
  }
  for (var kx = 0u; kx < MAX_KW; kx++) { partial[kx * WG + t] = acc[kx]; }
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (t < stride) {
      for (var kx = 0u; kx < p.kw; kx++) {
        partial[kx * WG + t] += partial[kx * WG + t + stride];
      }
    }
    workgroupBarrier();
  }
  if (row < rows) {
    if (t < p.kw) { dweight[row * p.kw + t] = partial[t * WG]; }
  } else if (row < rows + p.cout && t == 0u) {
    dbias[row - rows] = partial[0];
  }
}
