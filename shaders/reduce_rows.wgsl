// Deterministic sums over the rows of a row-major matrix, one level of a tree:
//   dst[dstOffset + j·cols + c] (=, or += with ACCUMULATE) scale · Σ_{r in chunk j} src[r·stride + c]
// The planner (src/gpu/kernels/reduce-rows.ts) repeats levels, each summing
// fixed chunks of rows into one partial row per chunk, until one row is
// left; only the last level scales and may accumulate. Every sum runs in a
// fixed order (rows in order within a chunk, chunks in order on the next
// level, a fixed tree within a workgroup): the same bits on every run and
// every adapter, with no float atomics (compiled `+subgroups`, `tree`'s order
// within a workgroup is the adapter's: the same bits on every run there).
//   columns: one invocation per (chunk, column) walks `chunk` rows in order;
//            neighbouring invocations read neighbouring columns (for wide rows)
//   tree:    one workgroup per (chunk of 64 rows, column): 64 invocations sum
//            one row each, then _group_reduce's groupSum (for
//            narrow rows: loss and count vectors, a few columns)

struct Dims { rows: u32, cols: u32, stride: u32, chunk: u32, dstOffset: u32, scale: f32, _a: u32, _b: u32 }

override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

fn put(i: u32, s: f32) {
  let v = s * dims.scale;
  if (ACCUMULATE) { dst[dims.dstOffset + i] += v; } else { dst[dims.dstOffset + i] = v; }
}

@compute @workgroup_size(64)
fn columns(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  let chunks = (dims.rows + dims.chunk - 1u) / dims.chunk;
  if (i >= chunks * dims.cols) { return; }
  let j = i / dims.cols;
  let c = i % dims.cols;
  let r0 = j * dims.chunk;
  let r1 = min(dims.rows, r0 + dims.chunk);
  var s = 0.0;
  for (var r = r0; r < r1; r++) { s += src[r * dims.stride + c]; }
  put(i, s);
}

// tree sums with _group_reduce: a fixed tree in workgroup memory, or subgroup operations `+subgroups`.
// #import _group_reduce
const TREE_PER = 1u; // rows per invocation: GROUP rows per workgroup

@compute @workgroup_size(GROUP)
fn tree(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = wid.x + wid.y * groups.x; // j · cols + c
  let chunks = (dims.rows + GROUP * TREE_PER - 1u) / (GROUP * TREE_PER);
  let live = g < chunks * dims.cols;
  let j = g / dims.cols;
  let c = g % dims.cols;
  let r0 = j * GROUP * TREE_PER + t * TREE_PER;
  var s = 0.0;
  for (var q = 0u; q < TREE_PER; q++) {
    let r = r0 + q;
    if (live && r < dims.rows) { s += src[r * dims.stride + c]; }
  }
  let total = groupSum(t, s);
  if (t == 0u && live) { put(g, total); }
}
