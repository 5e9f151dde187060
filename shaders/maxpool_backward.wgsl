// 2x2 max-pooling backward: each input cell receives its window's output
// gradient if it was the recorded winner, else 0 (windows do not overlap, so
// one thread per input element writes everything, without atomics). Rows or
// columns the forward pass dropped, and windows marked 4 (fused ReLU, max not
// positive), get 0.

struct Params {
  planes: u32, h: u32, w: u32, oh: u32,
  ow: u32, _pad0: u32, _pad1: u32, _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> argmax: array<u32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u; // 2-D dispatch when there are more than 65535 workgroups
  if (i >= p.planes * p.h * p.w) { return; }
  let ix = i % p.w;
  let iy = (i / p.w) % p.h;
  let plane = i / (p.w * p.h);
  let oy = iy / 2u;
  let ox = ix / 2u;
  var g = 0.0;
  if (oy < p.oh && ox < p.ow) {
    let o = (plane * p.oh + oy) * p.ow + ox;
    if (argmax[o] == (iy % 2u) * 2u + (ix % 2u)) { g = dy[o]; }
  }
  dx[i] = g;
}
