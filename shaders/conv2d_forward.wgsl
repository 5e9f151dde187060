// conv2d forward: y = conv(x, w) + b. Stride 1, zero padding.
// Activations NCHW, weights OIHW (the PyTorch order).
// Direct form, no im2col buffer: at MNIST sizes im2col would hold kh*kw times
// the activations, while here each thread reuses every input value it loads
// across BLOCK filters. One thread: output pixel (n, oy, ox), filters co0..co0+3.

struct Params {
  n: u32, cin: u32, h: u32, w: u32,
  cout: u32, kh: u32, kw: u32, pad: u32,
  oh: u32, ow: u32, _pad0: u32, _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const BLOCK: u32 = 4u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let pix = gid.x;
  let co0 = gid.y * BLOCK;
  if (pix >= p.n * p.oh * p.ow || co0 >= p.cout) { return; }
  let ox = pix % p.ow;
  let oy = (pix / p.ow) % p.oh;
  let n = pix / (p.ow * p.oh);
  let taps = p.kh * p.kw;
  let fstride = p.cin * taps; // distance between consecutive filters
  // Filters past cout (in the last block) read the last weight; they are never stored.
  let wlast = p.cout * fstride - 1u;
  var acc = vec4<f32>(0.0);
  for (var ci = 0u; ci < p.cin; ci++) {
    let xplane = (n * p.cin + ci) * p.h;
    let wbase = co0 * fstride + ci * taps;
    for (var ky = 0u; ky < p.kh; ky++) {
      let iy = i32(oy + ky) - i32(p.pad); // negative inside the top padding
      if (iy < 0 || iy >= i32(p.h)) { continue; }
      let xrow = (xplane + u32(iy)) * p.w;
      for (var kx = 0u; kx < p.kw; kx++) {
        let ix = i32(ox + kx) - i32(p.pad);
        if (ix < 0 || ix >= i32(p.w)) { continue; }
        let v = x[xrow + u32(ix)];
        let wi = wbase + ky * p.kw + kx;
        acc += v * vec4<f32>(
          weight[wi],
          weight[min(wi + fstride, wlast)],
          weight[min(wi + 2u * fstride, wlast)],
          weight[min(wi + 3u * fstride, wlast)],
        );
      }
    }
  }
  let plane = p.oh * p.ow;
  let obase = (n * p.cout + co0) * plane + oy * p.ow + ox;
  for (var j = 0u; j < BLOCK; j++) {
    if (co0 + j < p.cout) { y[obase + j * plane] = acc[j] + bias[co0 + j]; }
  }
}
