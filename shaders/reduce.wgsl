// out[outIndex] = scale · Σ_i x[i], by one workgroup: each invocation sums a
// strided slice in order, then a tree in workgroup memory. One workgroup keeps
// the result deterministic and needs no second pass; it is meant for
// per-batch vectors (loss, accuracy), not for million-element tensors.

struct Dims { n: u32, outIndex: u32, scale: f32, _pad: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

const WG = 256u;
var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32) {
  var s = 0.0;
  for (var i = t; i < dims.n; i += WG) { s += x[i]; }
  partial[t] = s;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (t < stride) { partial[t] += partial[t + stride]; }
    workgroupBarrier();
  }
  if (t == 0u) { out[dims.outIndex] = partial[0] * dims.scale; }
}
