// 2x2 max-pooling, stride 2, NCHW. An odd last row or column is dropped.
// Records which cell of each window won (0 top-left, 1 top-right,
// 2 bottom-left, 3 bottom-right; ties go to the earlier cell) so backward needs
// no search. With `relu` set, computes max(0, window max) — the same as ReLU
// then pooling, in one pass over the activations — and marks windows whose max
// is not positive with cell 4: ReLU passes no gradient there.

struct Params {
  planes: u32, h: u32, w: u32, oh: u32,
  ow: u32, relu: u32, _pad0: u32, _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> argmax: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let o = gid.x + gid.y * groups.x * 64u; // 2-D dispatch when there are more than 65535 workgroups
  if (o >= p.planes * p.oh * p.ow) { return; }
  let ox = o % p.ow;
  let oy = (o / p.ow) % p.oh;
  let plane = o / (p.ow * p.oh);
  let base = (plane * p.h + 2u * oy) * p.w + 2u * ox;
  var best = x[base];
  var cell = 0u;
  let c1 = x[base + 1u];
  if (c1 > best) { best = c1; cell = 1u; }
  let c2 = x[base + p.w];
  if (c2 > best) { best = c2; cell = 2u; }
  let c3 = x[base + p.w + 1u];
  if (c3 > best) { best = c3; cell = 3u; }
  if (p.relu != 0u && !(best > 0.0)) { best = 0.0; cell = 4u; }
  y[o] = best;
  argmax[o] = cell;
}
