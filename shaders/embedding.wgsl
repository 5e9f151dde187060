// Embedding lookup: out[r, :] = weight[ids[r], :] for ids [rows] and weight [vocab × dim].
// Backward is a scatter-add, written as a gather so that it needs no float
// atomics and sums in a fixed order (deterministic, the same on every peer):
// one invocation per weight entry (v, c) and chunk j of `chunk` rows walks
// the chunk's rows in order and adds dy[r, c] where ids[r] == v, into
// dweight[j·vocab·dim + v·dim + c]. With one chunk that is the gradient; with
// several, per-chunk partials that reduce_rows.wgsl sums in order, so the
// workgroups grow with the rows. That is vocab × rows × dim reads, fine for
// the small vocabularies (characters, positions) this serves.
// Ids at or past vocab are refused on the CPU before upload; here they read 0.
//
// A weight bigger than one binding is planned in slices of vocabulary rows:
// `first` is the slice's first row, `vocab` its row count, `total` the whole
// vocabulary; weight and dweight are bound from row `first`. Forward, a slice
// writes only the rows whose id it holds (the last one also the zeros of ids
// past the vocabulary); backward, it sums only its own entries. Unsliced:
// first = 0, vocab = total.

struct Dims { rows: u32, dim: u32, vocab: u32, chunk: u32, first: u32, total: u32 }

override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> dweight: array<f32>;

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

@compute @workgroup_size(256)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  let entries = dims.vocab * dims.dim;
  let chunks = (dims.rows + dims.chunk - 1u) / dims.chunk;
  if (i >= chunks * entries) { return; }
  let e = i % entries;
  let v = dims.first + e / dims.dim;
  let c = e % dims.dim;
  let r0 = (i / entries) * dims.chunk;
  let r1 = min(dims.rows, r0 + dims.chunk);
  var s = 0.0;
  for (var r = r0; r < r1; r++) {
    if (ids[r] == v) { s += dy[r * dims.dim + c]; }
  }
  if (ACCUMULATE) { dweight[i] += s; } else { dweight[i] = s; }
}
