// conv2d, stride 1, zero padding; activations NCHW, weights OIHW (PyTorch order).
//
//   y[n,o,oy,ox] = bias[o] + sum over i, ky, kx of x[n,i,oy+ky-pad_y,ox+kx-pad_x] * w(o,i,ky,kx)
//
// The same kernel computes the gradient wrt the input (FLIP): dx is dy
// convolved with the kernel rotated by 180 degrees and its channels swapped,
// padded by kh-1-pad rows and kw-1-pad columns. The host passes that
// transposed problem in `p` (input dy, output dx), and w(o,i,ky,kx) then
// reads w[i,o,kh-1-ky,kw-1-kx].
//
// Direct form, no im2col buffer (that would hold kh*kw copies of the
// activations). One thread computes PX = 8 neighbouring output pixels of a
// row for 4 output channels: for each kernel row it slides a window of PX
// inputs along x, so each step of the kx loop costs one input load and one
// 4-channel weight load for 4*PX multiply-adds. The window and accumulators
// are named variables, not arrays: software adapters keep indexed arrays in
// memory, which made this kernel several times slower. Padding is a clamped
// load and a select, never a branch around the arithmetic.

struct Params {
  n: u32, cin: u32, h: u32, w: u32,
  cout: u32, kh: u32, kw: u32, pad_y: u32,
  pad_x: u32, oh: u32, ow: u32, _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

// Output pixels per thread (the named accumulators a0..a7).
const PX: u32 = 8u;
override FLIP: bool = false;
override HAS_BIAS: bool = true;

// Index of w(o, i, ky, kx) in the OIHW weight array.
fn weight_index(o: u32, i: u32, ky: u32, kx: u32) -> u32 {
  if (FLIP) { return ((i * p.cout + o) * p.kh + (p.kh - 1u - ky)) * p.kw + (p.kw - 1u - kx); }
  return ((o * p.cin + i) * p.kh + ky) * p.kw + kx;
}

// x[row + ix], or 0 in the padding. `&`, not `&&`: short-circuit operators
// become branches, and SwiftShader took minutes to compile these.
fn load_x(row: u32, row_ok: bool, ix: i32) -> f32 {
  let ok = row_ok & (ix >= 0) & (ix < i32(p.w));
  return select(0.0, x[row + u32(clamp(ix, 0, i32(p.w) - 1))], ok);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let tiles_x = (p.ow + PX - 1u) / PX;
  let tiles = p.n * p.oh * tiles_x;
  // Threads past the end compute a duplicate tile and skip the store, so that
  // every thread runs the same loops.
  let tile = min(gid.x, tiles - 1u);
  let ox0 = (tile % tiles_x) * PX;
  let oy = (tile / tiles_x) % p.oh;
  let n = tile / (tiles_x * p.oh);
  let o0 = wid.y * 4u;
  // Channels past cout in the last block repeat the last one; never stored.
  let o1 = min(o0 + 1u, p.cout - 1u);
  let o2 = min(o0 + 2u, p.cout - 1u);
  let o3 = min(o0 + 3u, p.cout - 1u);

  var a0 = vec4<f32>(0.0); var a1 = vec4<f32>(0.0); var a2 = vec4<f32>(0.0); var a3 = vec4<f32>(0.0);
  var a4 = vec4<f32>(0.0); var a5 = vec4<f32>(0.0); var a6 = vec4<f32>(0.0); var a7 = vec4<f32>(0.0);
  for (var ci = 0u; ci < p.cin; ci++) {
    let plane = (n * p.cin + ci) * p.h;
    for (var ky = 0u; ky < p.kh; ky++) {
      let iy = i32(oy + ky) - i32(p.pad_y);
      let row_ok = (iy >= 0) & (iy < i32(p.h));
      let row = (plane + u32(clamp(iy, 0, i32(p.h) - 1))) * p.w;
      let ix0 = i32(ox0) - i32(p.pad_x);
      // xj is the input under output pixel ox0 + j for the current kx.
      var x0 = load_x(row, row_ok, ix0);
      var x1 = load_x(row, row_ok, ix0 + 1);
      var x2 = load_x(row, row_ok, ix0 + 2);
      var x3 = load_x(row, row_ok, ix0 + 3);
      var x4 = load_x(row, row_ok, ix0 + 4);
      var x5 = load_x(row, row_ok, ix0 + 5);
      var x6 = load_x(row, row_ok, ix0 + 6);
      var x7 = load_x(row, row_ok, ix0 + 7);
      for (var kx = 0u; kx < p.kw; kx++) {
        let w4 = vec4<f32>(
          weight[weight_index(o0, ci, ky, kx)],
          weight[weight_index(o1, ci, ky, kx)],
          weight[weight_index(o2, ci, ky, kx)],
          weight[weight_index(o3, ci, ky, kx)],
        );
        a0 += x0 * w4; a1 += x1 * w4; a2 += x2 * w4; a3 += x3 * w4;
        a4 += x4 * w4; a5 += x5 * w4; a6 += x6 * w4; a7 += x7 * w4;
        x0 = x1; x1 = x2; x2 = x3; x3 = x4; x4 = x5; x5 = x6; x6 = x7;
        x7 = load_x(row, row_ok, ix0 + i32(kx) + 8);
      }
    }
  }

  if (gid.x >= tiles) { return; }
  var b = vec4<f32>(0.0);
  if (HAS_BIAS) { b = vec4<f32>(bias[o0], bias[o1], bias[o2], bias[o3]); }
  let out_plane = p.oh * p.ow;
  let base = (n * p.cout + o0) * out_plane + oy * p.ow + ox0;
  // Store the first min(PX, ow - ox0) pixels; the others belong to the next tile.
  let count = min(PX, p.ow - ox0);
  for (var j = 0u; j < 4u; j++) {
    if (o0 + j >= p.cout) { break; }
    let o = base + j * out_plane;
    y[o] = a0[j] + b[j];
    if (count > 1u) { y[o + 1u] = a1[j] + b[j]; }
    if (count > 2u) { y[o + 2u] = a2[j] + b[j]; }
    if (count > 3u) { y[o + 3u] = a3[j] + b[j]; }
    if (count > 4u) { y[o + 4u] = a4[j] + b[j]; }
    if (count > 5u) { y[o + 5u] = a5[j] + b[j]; }
    if (count > 6u) { y[o + 6u] = a6[j] + b[j]; }
    if (count > 7u) { y[o + 7u] = a7[j] + b[j]; }
  }
}
