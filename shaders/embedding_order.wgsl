// The order of an embedding's backward pass: the row indices sorted by
// (token id, row index), so that each token's rows lie together and in row
// order. A bitonic sort over `padded` (rows rounded up to a power of two)
// slots: `init` writes 0, 1, 2, …; each `step` dispatch is one compare-and-swap
// stage (k, j) of the network. The keys are distinct (the row index breaks
// ties), so the result is one permutation on every device; the slots past
// `rows` are padding and sort last. No loops: each invocation is one compare.

struct Step { rows: u32, padded: u32, k: u32, j: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> order: array<u32>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 256u; }

// Whether row a sorts before row b: by id, then by row; padding (≥ rows) last, in slot order.
fn before(a: u32, b: u32) -> bool {
  if (b >= step.rows) { return a < b; }
  if (a >= step.rows) { return false; }
  let ia = ids[a];
  let ib = ids[b];
  return ia < ib || (ia == ib && a < b);
}

@compute @workgroup_size(256)
fn init(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i < step.padded) { order[i] = i; }
}

@compute @workgroup_size(256)
fn sort_step(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  let l = i ^ step.j;
  if (i >= step.padded || l <= i) { return; }
  let a = order[i];
  let b = order[l];
  let ascending = (i & step.k) == 0u;
  if ((ascending && before(b, a)) || (!ascending && before(a, b))) {
    order[i] = b;
    order[l] = a;
  }
}
