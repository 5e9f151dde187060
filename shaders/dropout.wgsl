// Inverted dropout with a mask that is never stored: element i of step s is
// kept when hash(seed, s, i) ≥ threshold (threshold = p · 2³²), and kept
// values are scaled by 1 / (1 − p). Backward recomputes the same mask from
// the same (seed, step), so forward and backward agree, and a run is
// reproducible from its seed. The step lives on the GPU (state[0]) and
// `advance` increments it, so a recorded training step needs no CPU write.

struct Dims { n: u32, threshold: u32, scale: f32, seed: u32 }

override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read_write> state: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 256u; }

// MurmurHash3's 32-bit finaliser: every input bit flips about half the output bits.
fn mix32(v: u32) -> u32 {
  var h = v;
  h ^= h >> 16u;
  h *= 0x85ebca6bu;
  h ^= h >> 13u;
  h *= 0xc2b2ae35u;
  h ^= h >> 16u;
  return h;
}

fn keep(i: u32) -> bool {
  return mix32(i ^ mix32(dims.seed ^ mix32(state[0] + 0x9e3779b9u))) >= dims.threshold;
}

@compute @workgroup_size(1)
fn advance() {
  state[0] += 1u;
}

@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  y[i] = select(0.0, x[i] * dims.scale, keep(i));
}

@compute @workgroup_size(256)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.n) { return; }
  let d = select(0.0, dy[i] * dims.scale, keep(i));
  if (ACCUMULATE) { dx[i] += d; } else { dx[i] = d; }
}
