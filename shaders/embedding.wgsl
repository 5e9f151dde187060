// Embedding lookup: out[r, :] = weight[ids[r], :] for ids [rows] and weight [vocab × dim].
//
// Backward is a scatter-add over rows, with no float atomics and a fixed order
// of summation (the same bits on every peer and runtime). `order` holds the
// rows sorted by (id, row) (embedding_order.wgsl), so each token's rows form
// one run of sorted positions. The positions are cut into tiles of `tile`:
// - `segments`, one invocation per (tile, column), walks its tile in order and
//   sums each run. A run that starts and ends in the tile is written to
//   dweight; the part of a run that continues into the next tile is the tile's
//   `tail`, and the part of a run that came from the previous tile and ends
//   here is the tile's `head` (parts = tails then heads, tiles × dim each).
// - `joins`, one invocation per (tile, column) whose first run came from the
//   left and ends in it, adds the tails of the earlier tiles of that run in
//   order, then its head, into dweight.
// That is rows × dim reads of dy; the loops are bounded by `tile` and by the
// number of tiles (the plan refuses more tiles than the loop cap allows).
// Entries of tokens with no rows are zeroed by `clear` (not when accumulating).
// Ids at or past vocab are refused on the CPU before upload; forward reads 0.
//
// A weight bigger than one binding is planned in slices of vocabulary rows:
// `first` is the slice's first row, `vocab` its row count, `total` the whole
// vocabulary; weight and dweight are bound from row `first`. Forward, a slice
// writes only the rows whose id it holds (the last one also the zeros of ids
// past the vocabulary); backward, it writes only its own entries. Unsliced:
// first = 0, vocab = total.

struct Dims { rows: u32, dim: u32, vocab: u32, tile: u32, first: u32, total: u32 }

override ACCUMULATE: bool = false;

// Past the last sorted position: differs from every id (ids are below vocab).
const END: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> dweight: array<f32>;
@group(0) @binding(6) var<storage, read> order: array<u32>;
@group(0) @binding(7) var<storage, read_write> parts: array<f32>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 256u; }

@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.rows * dims.dim) { return; }
  let id = ids[i / dims.dim];
  let v = id - dims.first; // wraps past vocab for ids below this slice
  if (v < dims.vocab) {
    out[i] = weight[v * dims.dim + i % dims.dim];
  } else if (id >= dims.total && dims.first + dims.vocab == dims.total) {
    out[i] = 0.0;
  }
}

fn tiles() -> u32 { return (dims.rows + dims.tile - 1u) / dims.tile; }

// The token id at sorted position p, or END past the last.
fn key(p: u32) -> u32 {
  if (p >= dims.rows) { return END; }
  return ids[order[p]];
}

// Writes (or adds) a token's sum for column c, if the token is in this slice.
fn put(v: u32, c: u32, s: f32) {
  let e = v - dims.first; // wraps past vocab for ids below this slice
  if (e >= dims.vocab) { return; }
  let i = e * dims.dim + c;
  if (ACCUMULATE) { dweight[i] += s; } else { dweight[i] = s; }
}

@compute @workgroup_size(256)
fn clear(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i < dims.vocab * dims.dim) { dweight[i] = 0.0; }
}

@compute @workgroup_size(256)
fn segments(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  let n = tiles() * dims.dim;
  if (i >= n) { return; }
  let c = i % dims.dim;
  let p0 = (i / dims.dim) * dims.tile;
  let p1 = min(dims.rows, p0 + dims.tile);
  var v = key(p0);
  var fromLeft = p0 > 0u && key(p0 - 1u) == v;
  var s = 0.0;
  for (var p = p0; p < p1; p++) {
    s += dy[order[p] * dims.dim + c];
    let next = key(p + 1u);
    if (next != v) {
      if (fromLeft) { parts[n + i] = s; } else { put(v, c, s); }
      s = 0.0;
      fromLeft = false;
      v = next;
    } else if (p + 1u == p1) {
      parts[i] = s;
    }
  }
}

@compute @workgroup_size(256)
fn joins(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  let n = tiles() * dims.dim;
  if (i >= n) { return; }
  let c = i % dims.dim;
  let t = i / dims.dim;
  let p0 = t * dims.tile;
  let last = min(dims.rows, p0 + dims.tile) - 1u;
  let v = key(p0);
  // Only a tile whose first run came from the left and ends in it joins that run.
  if (t == 0u || key(p0 - 1u) != v || (key(last) == v && key(last + 1u) == v)) { return; }
  var t0 = t - 1u;
  while (t0 > 0u && key(t0 * dims.tile - 1u) == v) { t0--; }
  var s = 0.0;
  for (var u = t0; u < t; u++) { s += parts[u * dims.dim + c]; }
  put(v, c, s + parts[n + i]);
}
