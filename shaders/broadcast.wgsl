// Elementwise ops with NumPy/PyTorch broadcasting over up to 4 dimensions
// (shapes right-aligned and padded with leading 1s by the wrapper).
// The output is contiguous with shape `shape`; an input's stride is 0 along a
// dimension it is broadcast over.
//   add:    out = a + alpha · b        (alpha = −1: subtract)
//   mul:    out = a · b
//   scale:  out = alpha · a            (no broadcasting; also scale's backward)
//   reduce: the gradient of a broadcast input: for each element j of the
//           input (shape `tshape`, 1 where it was broadcast), the sum of
//           alpha · dy over every output element j was broadcast to, times
//           `other` (the multiplication's other input) when HAS_OTHER.
// `reduce` sums in a fixed order per element: deterministic, no atomics.
// When the broadcast dimensions are long (a batch), reduce runs split: grid
// z takes coordinates [z·chunk, (z+1)·chunk) of dimension `split` (the
// outermost broadcast one) into its own partial dtarget[z·n + j], and
// reduce_rows.wgsl sums the partials in order. Unsplit: chunk = 0, one z.

struct Dims { shape: vec4<u32>, strideA: vec4<u32>, strideB: vec4<u32>, n: u32, alpha: f32, _a: u32, _b: u32 }
struct ReduceDims { shape: vec4<u32>, tshape: vec4<u32>, strideOther: vec4<u32>, n: u32, alpha: f32, split: u32, chunk: u32 }

override ACCUMULATE: bool = false;
override HAS_OTHER: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> rdims: ReduceDims;
@group(0) @binding(5) var<storage, read> dy: array<f32>;
@group(0) @binding(6) var<storage, read> other: array<f32>;
@group(0) @binding(7) var<storage, read_write> dtarget: array<f32>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 256u; }

// The 4-D coordinate of flat index i in a row-major array of shape s.
fn coords(i: u32, s: vec4<u32>) -> vec4<u32> {
  return vec4<u32>(i / (s.y * s.z * s.w), (i / (s.z * s.w)) % s.y, (i / s.w) % s.z, i % s.w);
}

// Integer dot products are spelled out: not every WGSL compiler takes dot() on u32 vectors.
fn dot4(c: vec4<u32>, s: vec4<u32>) -> u32 { return c.x * s.x + c.y * s.y + c.z * s.z + c.w * s.w; }

fn put(i: u32, v: f32) {
  if (ACCUMULATE) { out[i] += v; } else { out[i] = v; }
}

@compute @workgroup_size(256)
fn add(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  let c = coords(i, dims.shape);
  put(i, a[dot4(c, dims.strideA)] + dims.alpha * b[dot4(c, dims.strideB)]);
}

@compute @workgroup_size(256)
fn mul(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  let c = coords(i, dims.shape);
  put(i, a[dot4(c, dims.strideA)] * b[dot4(c, dims.strideB)]);
}

@compute @workgroup_size(256)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  put(i, dims.alpha * a[i]);
}

@compute @workgroup_size(256)
fn reduce(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let j = index(gid, groups);
  if (j >= rdims.n) { return; }
  let s = rdims.shape;
  let tc = coords(j, rdims.tshape);
  // Along a broadcast dimension (target 1, shape > 1) walk all of it; elsewhere stay at j's coordinate.
  let wide = rdims.tshape != s;
  var lo = select(tc, vec4<u32>(0u), wide);
  var hi = select(tc + vec4<u32>(1u), s, wide);
  if (rdims.chunk > 0u) {
    lo[rdims.split] = gid.z * rdims.chunk;
    hi[rdims.split] = min(s[rdims.split], lo[rdims.split] + rdims.chunk);
  }
  let strides = vec4<u32>(s.y * s.z * s.w, s.z * s.w, s.w, 1u);
  var acc = 0.0;
  for (var c0 = lo.x; c0 < hi.x; c0++) {
    for (var c1 = lo.y; c1 < hi.y; c1++) {
      for (var c2 = lo.z; c2 < hi.z; c2++) {
        for (var c3 = lo.w; c3 < hi.w; c3++) {
          let c = vec4<u32>(c0, c1, c2, c3);
          var g = dy[dot4(c, strides)];
          if (HAS_OTHER) { g *= other[dot4(c, rdims.strideOther)]; }
          acc += g;
        }
      }
    }
  }
  let v = rdims.alpha * acc;
  let at = gid.z * rdims.n + j;
  if (ACCUMULATE) { dtarget[at] += v; } else { dtarget[at] = v; }
}
