// conv2d gradient with respect to the input (stride 1, zero padding, NCHW/OIHW):
//   dx[n,ci,iy,ix] = sum over co, ky, kx of dy[n,co,iy+pad-ky,ix+pad-kx] * w[co,ci,ky,kx]
// i.e. dy correlated with the flipped kernel. Computed per input pixel, so no
// two threads write the same element (no atomics). One thread: input pixel
// (n, iy, ix) for input channels ci0..ci0+3, reusing each dy value 4 times.

struct Params {
  n: u32, cin: u32, h: u32, w: u32,
  cout: u32, kh: u32, kw: u32, pad: u32,
  oh: u32, ow: u32, _pad0: u32, _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

const BLOCK: u32 = 4u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let pix = gid.x;
  let ci0 = gid.y * BLOCK;
  if (pix >= p.n * p.h * p.w || ci0 >= p.cin) { return; }
  let ix = pix % p.w;
  let iy = (pix / p.w) % p.h;
  let n = pix / (p.w * p.h);
  let taps = p.kh * p.kw;
  // Channels past cin (in the last block) read the last weight; they are never stored.
  let wlast = p.cout * p.cin * taps - 1u;
  var acc = vec4<f32>(0.0);
  for (var co = 0u; co < p.cout; co++) {
    let gplane = (n * p.cout + co) * p.oh;
    let wbase = (co * p.cin + ci0) * taps;
    for (var ky = 0u; ky < p.kh; ky++) {
      let oy = i32(iy + p.pad) - i32(ky);
      if (oy < 0 || oy >= i32(p.oh)) { continue; }
      let grow = (gplane + u32(oy)) * p.ow;
      for (var kx = 0u; kx < p.kw; kx++) {
        let ox = i32(ix + p.pad) - i32(kx);
        if (ox < 0 || ox >= i32(p.ow)) { continue; }
        let g = dy[grow + u32(ox)];
        let wi = wbase + ky * p.kw + kx;
        acc += g * vec4<f32>(
          weight[wi],
          weight[min(wi + taps, wlast)],
          weight[min(wi + 2u * taps, wlast)],
          weight[min(wi + 3u * taps, wlast)],
        );
      }
    }
  }
  let plane = p.h * p.w;
  let obase = (n * p.cin + ci0) * plane + iy * p.w + ix;
  for (var j = 0u; j < BLOCK; j++) {
    if (ci0 + j < p.cin) { dx[obase + j * plane] = acc[j]; }
  }
}
