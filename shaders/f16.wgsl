// f32 ↔ f16 for halving gradient traffic. Two halves per u32 (pack2x16float):
// element 2i in the low 16 bits, 2i+1 in the high bits; an odd tail pads with 0.
//   pack:   packed[i] = pack2x16float(x[2i], x[2i+1])      (n = float count)
//   unpack: x[2i], x[2i+1] = unpack2x16float(packed[i])    (tail beyond n not written)

struct Dims { n: u32, _a: u32, _b: u32, _c: u32 }

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read_write> floats: array<f32>;
@group(0) @binding(2) var<storage, read_write> packed: array<u32>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 256u; }

@compute @workgroup_size(256)
fn pack(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  let j = 2u * i;
  if (j >= dims.n) { return; }
  var hi = 0.0;
  if (j + 1u < dims.n) { hi = floats[j + 1u]; }
  packed[i] = pack2x16float(vec2<f32>(floats[j], hi));
}

@compute @workgroup_size(256)
fn unpack(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  let j = 2u * i;
  if (j >= dims.n) { return; }
  let v = unpack2x16float(packed[i]);
  floats[j] = v.x;
  if (j + 1u < dims.n) { floats[j + 1u] = v.y; }
}
