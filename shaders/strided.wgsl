// One strided copy serves transpose, slice and concat (forward and backward):
// for every coordinate c of a 4-D iteration space `shape`,
//   dst[dstOffset + c·dstStride] (= or +=) src[srcOffset + c·srcStride]
// A transpose permutes the source strides; a slice offsets the source; a
// concat piece offsets the destination. `fill` sets dst[dstOffset ..
// dstOffset + n) to `value` (zeroing a gradient before a slice's backward
// writes its window).

struct Dims {
  shape: vec4<u32>, srcStride: vec4<u32>, dstStride: vec4<u32>,
  n: u32, srcOffset: u32, dstOffset: u32, value: f32,
}

override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 256u; }
fn dot4(c: vec4<u32>, s: vec4<u32>) -> u32 { return c.x * s.x + c.y * s.y + c.z * s.z + c.w * s.w; }

@compute @workgroup_size(256)
fn copy(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  let s = dims.shape;
  let c = vec4<u32>(i / (s.y * s.z * s.w), (i / (s.z * s.w)) % s.y, (i / s.w) % s.z, i % s.w);
  let v = src[dims.srcOffset + dot4(c, dims.srcStride)];
  let o = dims.dstOffset + dot4(c, dims.dstStride);
  if (ACCUMULATE) { dst[o] += v; } else { dst[o] = v; }
}

@compute @workgroup_size(256)
fn fill(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  dst[dims.dstOffset + i] = dims.value;
}
