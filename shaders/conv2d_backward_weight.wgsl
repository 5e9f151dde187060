// conv2d gradients wrt the weights and the bias (stride 1, zero padding,
// NCHW activations, OIHW weights), summed over the batch:
//
//   dw[co,ci,ky,kx] = sum over n, oy, ox of dy[n,co,oy,ox] * x[n,ci,oy+ky-pad,ox+kx-pad]
//   db[co]          = sum over n, oy, ox of dy[n,co,oy,ox]
//
// Long reductions into few outputs. One workgroup owns one kernel row
// (ci, ky) of 4 filters co0..co0+3: 4 x kw (<= 8) weights, in eight vec4
// accumulators (one per tap kx, a lane per filter). The last workgroups own
// the biases, 4 filters each. The 64 threads split the output rows into
// segments of 8 pixels; along a segment a thread slides an 8-input window one
// pixel at a time, so each pixel costs 4 dy loads and 1 input load for 32
// multiply-adds. The threads' sums are then added in workgroup memory.
// Accumulators and window are named variables, not arrays: software adapters
// keep indexed arrays in memory, which is several times slower.
//
// Split over the batch: grid z takes images [z·per_slice, (z+1)·per_slice)
// and writes its partial sums to its own slice of dweight and dbias
// (dweight[z·cout·cin·kh·kw + ..], dbias[z·cout + ..]); reduce_rows.wgsl
// sums the slices in order, so the workgroups grow with the batch.
// Unsplit: per_slice = n, one z.

struct Params {
  n: u32, cin: u32, h: u32, w: u32,
  cout: u32, kh: u32, kw: u32, pad_y: u32,
  pad_x: u32, oh: u32, ow: u32, per_slice: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dweight: array<f32>;
@group(0) @binding(4) var<storage, read_write> dbias: array<f32>;

const WG: u32 = 64u;
const SEG: u32 = 8u; // output pixels per segment

var<workgroup> partial: array<vec4<f32>, 512>; // 8 taps x WG threads, tap-major

// x[row + ix], or 0 in the padding. `&`, not `&&`: short-circuit operators
// become branches, and SwiftShader took minutes to compile these.
fn load_x(row: u32, row_ok: bool, ix: i32) -> f32 {
  let ok = row_ok & (ix >= 0) & (ix < i32(p.w));
  return select(0.0, x[row + u32(clamp(ix, 0, i32(p.w) - 1))], ok);
}

@compute @workgroup_size(64)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) groups: vec3<u32>,
  @builtin(local_invocation_index) t: u32,
) {
  // Workgroups are folded into 2-D when there are more than 65535.
  let g = wid.x + wid.y * groups.x;
  let blocks = (p.cout + 3u) / 4u;
  let rows = blocks * p.cin * p.kh;
  let is_bias = g >= rows;
  let ky = g % p.kh;
  let ci = (g / p.kh) % p.cin;
  let co0 = select(g / (p.kh * p.cin), g - rows, is_bias) * 4u;
  let segs_x = (p.ow + SEG - 1u) / SEG;
  let n0 = wid.z * p.per_slice;
  let images = min(p.n, n0 + p.per_slice) - n0;
  let segs = select(images * p.oh * segs_x, 0u, g >= rows + blocks);
  // Filters past cout in the last block repeat the last one; never stored.
  let co1 = min(co0 + 1u, p.cout - 1u);
  let co2 = min(co0 + 2u, p.cout - 1u);
  let co3 = min(co0 + 3u, p.cout - 1u);
  let plane = p.oh * p.ow;

  var a0 = vec4<f32>(0.0); var a1 = vec4<f32>(0.0); var a2 = vec4<f32>(0.0); var a3 = vec4<f32>(0.0);
  var a4 = vec4<f32>(0.0); var a5 = vec4<f32>(0.0); var a6 = vec4<f32>(0.0); var a7 = vec4<f32>(0.0);
  for (var s = t; s < segs; s += WG) {
    let ox0 = (s % segs_x) * SEG;
    let oy = (s / segs_x) % p.oh;
    let n = n0 + s / (segs_x * p.oh);
    let gbase = n * p.cout * plane + oy * p.ow;
    let iy = i32(oy + ky) - i32(p.pad_y);
    let row_ok = (iy >= 0) & (iy < i32(p.h)) & !is_bias;
    let row = ((n * p.cin + ci) * p.h + u32(clamp(iy, 0, i32(p.h) - 1))) * p.w;
    let ix0 = i32(ox0) - i32(p.pad_x);
    // w0, w1: the inputs under taps kx = 0..7 for the current pixel.
    var w0 = vec4<f32>(load_x(row, row_ok, ix0), load_x(row, row_ok, ix0 + 1), load_x(row, row_ok, ix0 + 2), load_x(row, row_ok, ix0 + 3));
    var w1 = vec4<f32>(load_x(row, row_ok, ix0 + 4), load_x(row, row_ok, ix0 + 5), load_x(row, row_ok, ix0 + 6), load_x(row, row_ok, ix0 + 7));
    let count = min(SEG, p.ow - ox0);
    if (is_bias) {
      for (var j = 0u; j < count; j++) {
        let o = gbase + ox0 + j;
        a0 += vec4<f32>(dy[o + co0 * plane], dy[o + co1 * plane], dy[o + co2 * plane], dy[o + co3 * plane]);
      }
      continue;
    }
    for (var j = 0u; j < count; j++) {
      let o = gbase + ox0 + j;
      let d = vec4<f32>(dy[o + co0 * plane], dy[o + co1 * plane], dy[o + co2 * plane], dy[o + co3 * plane]);
      a0 += d * w0.x; a1 += d * w0.y; a2 += d * w0.z; a3 += d * w0.w;
      a4 += d * w1.x; a5 += d * w1.y; a6 += d * w1.z; a7 += d * w1.w;
      w0 = vec4<f32>(w0.yzw, w1.x);
      w1 = vec4<f32>(w1.yzw, load_x(row, row_ok, ix0 + i32(j) + 8));
    }
  }

  partial[t] = a0; partial[WG + t] = a1; partial[2u * WG + t] = a2; partial[3u * WG + t] = a3;
  partial[4u * WG + t] = a4; partial[5u * WG + t] = a5; partial[6u * WG + t] = a6; partial[7u * WG + t] = a7;
  workgroupBarrier();
  // Thread t < 32 adds up tap t / 4 of filter co0 + t % 4 over the 64 threads.
  let k = t / 4u;
  let j = t % 4u;
  let taps = select(p.kw, 1u, is_bias);
  if (t < 32u && k < taps && co0 + j < p.cout && g < rows + blocks) {
    var sum = 0.0;
    for (var q = 0u; q < WG; q++) { sum += partial[k * WG + q][j]; }
    if (is_bias) {
      dbias[wid.z * p.cout + co0 + j] = sum;
    } else {
      dweight[wid.z * p.cout * p.cin * p.kh * p.kw + (((co0 + j) * p.cin + ci) * p.kh + ky) * p.kw + k] = sum;
    }
  }
}
