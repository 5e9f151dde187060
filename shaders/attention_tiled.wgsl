// Multi-head self-attention in tiles (the FlashAttention-2 scheme), over the same layouts as
// attention.wgsl: q, k, v read from the packed projection qkv [batch, T, 3·D], y [batch, T, D] written
// with the heads side by side. No [T, T] buffer: forward saves y and each query row's log-sum-exp
// lse [batch, H, T]; backward recomputes the scores tile by tile from them.
//   forward:      a workgroup per (b, h, 16 query rows) walks the key tiles of 16, keeping per row the
//                 running max m, the running sum l of exp(z − m) and the output o rescaled by
//                 exp(m_old − m_new) as m grows; then y = o / l and lse = m + log l.
//   backward_dq:  a workgroup per (b, h, 16 query rows): delta_t = dy_t·y_t (saved for backward_dkv),
//                 then per key tile p = exp(z − lse_t), ds = p (dy_t·v_s − delta_t),
//                 dq_t = scale · Σ_s ds k_s. Record it before backward_dkv.
//   backward_dkv: a workgroup per (b, h, 8 keys): per query tile the same p and ds,
//                 dv_s = Σ_t p dy_t, dk_s = scale · Σ_t ds q_t.
// The two backward kernels write disjoint columns of dqkv: no atomics, the same sums in the same order
// on every run. With CAUSAL, tiles wholly above the diagonal are never visited.
// An invocation runs at most 2·hd + 89 loop iterations per tile it visits (T/16 tiles, hd ≤ 64):
// about 14,000 at T = 1024, under llvmpipe's cap of 65,535 on one invocation (kernel.ts checks).

struct Dims { batch: u32, T: u32, heads: u32, hd: u32, scale: f32, _a: u32, _b: u32, _c: u32 }

override CAUSAL: bool = true;
override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> lse: array<f32>;
@group(0) @binding(4) var<storage, read> dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> delta: array<f32>;
@group(0) @binding(6) var<storage, read_write> dqkv: array<f32>;

const HD_MAX = 64u;     // the largest head size these kernels take (tiled.ts checks)
const ROWS = 16u;       // query rows per tile
const KEYS = 16u;       // keys per tile in forward and backward_dq
const DKV_KEYS = 8u;    // keys per workgroup in backward_dkv (its workgroup memory holds q, dy, k and v)
const COLS = 4u;        // head columns each invocation accumulates: HD_MAX / 16
const MASKED = -3.0e38;

// Each entry point stays within the 16 KiB of workgroup memory WebGPU guarantees (about 13.5 KiB).
var<workgroup> tile_a: array<f32, 1024>;
var<workgroup> tile_b: array<f32, 1024>;
var<workgroup> tile_c: array<f32, 1024>;
var<workgroup> tile_d: array<f32, 1024>;
var<workgroup> small_a: array<f32, 256>;
var<workgroup> small_b: array<f32, 128>;
// backward_dkv's 8 keys' k and v (it also holds 16 rows of q and dy in tile_a and tile_b).
var<workgroup> key_k: array<f32, 512>;
var<workgroup> key_v: array<f32, 512>;

// Offset of element 0 of q (part 0), k (1) or v (2) for head h at position t of sample b.
fn qkv_at(b: u32, t: u32, part: u32, h: u32) -> u32 {
  let D = dims.heads * dims.hd;
  return (b * dims.T + t) * 3u * D + part * D + h * dims.hd;
}
fn out_at(b: u32, t: u32, h: u32) -> u32 { return (b * dims.T + t) * dims.heads * dims.hd + h * dims.hd; }
fn row_at(b: u32, h: u32, t: u32) -> u32 { return (b * dims.heads + h) * dims.T + t; }

// Element e of a tile of rows first.. (row-major, HD_MAX per row) of q/k/v, or 0 past T or hd.
fn qkv_tile(b: u32, h: u32, part: u32, first: u32, e: u32) -> f32 {
  let t = first + e / HD_MAX;
  let j = e % HD_MAX;
  if (t >= dims.T || j >= dims.hd) { return 0.0; }
  return qkv[qkv_at(b, t, part, h) + j];
}
fn dy_tile(b: u32, h: u32, first: u32, e: u32) -> f32 {
  let t = first + e / HD_MAX;
  let j = e % HD_MAX;
  if (t >= dims.T || j >= dims.hd) { return 0.0; }
  return dy[out_at(b, t, h) + j];
}
fn visible(t: u32, s: u32) -> bool { return t < dims.T && s < dims.T && (!CAUSAL || s <= t); }

// (b, h, first row or key) of the workgroup, or b = batch past the last one (the grid is rounded up).
fn work(wid: vec3<u32>, groups: vec3<u32>, per: u32) -> vec3<u32> {
  let tiles = (dims.T + per - 1u) / per;
  let w = wid.x + wid.y * groups.x;
  return vec3<u32>(w / (tiles * dims.heads), (w / tiles) % dims.heads, (w % tiles) * per);
}

// Dot products over the head of a row of one workgroup tile with a row of another.
fn dot_ac(ra: u32, rc: u32) -> f32 {
  var acc = 0.0;
  for (var j = 0u; j < dims.hd; j++) { acc += tile_a[ra * HD_MAX + j] * tile_c[rc * HD_MAX + j]; }
  return acc;
}
fn dot_bc(rb: u32, rc: u32) -> f32 {
  var acc = 0.0;
  for (var j = 0u; j < dims.hd; j++) { acc += tile_b[rb * HD_MAX + j] * tile_c[rc * HD_MAX + j]; }
  return acc;
}
fn dot_a_key_k(ra: u32, rk: u32) -> f32 {
  var acc = 0.0;
  for (var j = 0u; j < dims.hd; j++) { acc += tile_a[ra * HD_MAX + j] * key_k[rk * HD_MAX + j]; }
  return acc;
}
fn dot_b_key_v(rb: u32, rv: u32) -> f32 {
  var acc = 0.0;
  for (var j = 0u; j < dims.hd; j++) { acc += tile_b[rb * HD_MAX + j] * key_v[rv * HD_MAX + j]; }
  return acc;
}

// The last key a causal query tile starting at q0 sees, as a count of key tiles of `keys`.
fn key_tiles(q0: u32, keys: u32) -> u32 {
  let end = select(dims.T, min(q0 + ROWS, dims.T), CAUSAL);
  return (end + keys - 1u) / keys;
}

// tile_a: the workgroup's q rows; tile_c, tile_d: the key tile's k and v; small_a: scores, then p.
@compute @workgroup_size(256)
fn forward(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) groups: vec3<u32>,
  @builtin(local_invocation_index) lid: u32,
) {
  let at = work(wid, groups, ROWS);
  let b = at.x;
  let h = at.y;
  let q0 = at.z;
  if (b >= dims.batch) { return; }
  let r = lid / KEYS;
  let c = lid % KEYS;
  let t = q0 + r;
  for (var e = lid; e < ROWS * HD_MAX; e += 256u) { tile_a[e] = qkv_tile(b, h, 0u, q0, e); }
  var m = MASKED;
  var l = 0.0;
  var o = array<f32, COLS>(0.0, 0.0, 0.0, 0.0);
  let tiles = key_tiles(q0, KEYS);
  for (var kt = 0u; kt < tiles; kt++) {
    let k0 = kt * KEYS;
    for (var e = lid; e < KEYS * HD_MAX; e += 256u) {
      tile_c[e] = qkv_tile(b, h, 1u, k0, e);
      tile_d[e] = qkv_tile(b, h, 2u, k0, e);
    }
    workgroupBarrier();
    var z = MASKED;
    if (visible(t, k0 + c)) { z = dot_ac(r, c) * dims.scale; }
    small_a[lid] = z;
    workgroupBarrier();
    var mt = m;
    for (var cc = 0u; cc < KEYS; cc++) { mt = max(mt, small_a[r * KEYS + cc]); }
    workgroupBarrier();
    small_a[lid] = select(0.0, exp(z - mt), z > MASKED);
    workgroupBarrier();
    let alpha = exp(m - mt);
    l *= alpha;
    for (var i = 0u; i < COLS; i++) { o[i] *= alpha; }
    for (var cc = 0u; cc < KEYS; cc++) {
      let p = small_a[r * KEYS + cc];
      l += p;
      for (var i = 0u; i < COLS; i++) { o[i] += p * tile_d[cc * HD_MAX + c + i * KEYS]; }
    }
    m = mt;
    workgroupBarrier();
  }
  if (t >= dims.T) { return; }
  let out = out_at(b, t, h);
  for (var i = 0u; i < COLS; i++) {
    let j = c + i * KEYS;
    if (j < dims.hd) { y[out + j] = o[i] / l; }
  }
  if (c == 0u) { lse[row_at(b, h, t)] = m + log(l); }
}

// tile_a: q rows, tile_b: dy rows, tile_c: the key tile's v then k; small_a: delta's parts, then ds.
@compute @workgroup_size(256)
fn backward_dq(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) groups: vec3<u32>,
  @builtin(local_invocation_index) lid: u32,
) {
  let at = work(wid, groups, ROWS);
  let b = at.x;
  let h = at.y;
  let q0 = at.z;
  if (b >= dims.batch) { return; }
  let r = lid / KEYS;
  let c = lid % KEYS;
  let t = q0 + r;
  for (var e = lid; e < ROWS * HD_MAX; e += 256u) {
    tile_a[e] = qkv_tile(b, h, 0u, q0, e);
    tile_b[e] = dy_tile(b, h, q0, e);
  }
  var part = 0.0;
  if (t < dims.T) {
    let out = out_at(b, t, h);
    for (var j = c; j < dims.hd; j += KEYS) { part += dy[out + j] * y[out + j]; }
  }
  small_a[lid] = part;
  workgroupBarrier();
  var d = 0.0;
  for (var cc = 0u; cc < KEYS; cc++) { d += small_a[r * KEYS + cc]; }
  var row_lse = 0.0;
  if (t < dims.T) {
    row_lse = lse[row_at(b, h, t)];
    if (c == 0u) { delta[row_at(b, h, t)] = d; }
  }
  var dq = array<f32, COLS>(0.0, 0.0, 0.0, 0.0);
  let tiles = key_tiles(q0, KEYS);
  for (var kt = 0u; kt < tiles; kt++) {
    let k0 = kt * KEYS;
    workgroupBarrier();
    for (var e = lid; e < KEYS * HD_MAX; e += 256u) { tile_c[e] = qkv_tile(b, h, 2u, k0, e); }
    workgroupBarrier();
    let dp = dot_bc(r, c);
    workgroupBarrier();
    for (var e = lid; e < KEYS * HD_MAX; e += 256u) { tile_c[e] = qkv_tile(b, h, 1u, k0, e); }
    workgroupBarrier();
    var ds = 0.0;
    if (visible(t, k0 + c)) { ds = exp(dot_ac(r, c) * dims.scale - row_lse) * (dp - d); }
    small_a[lid] = ds;
    workgroupBarrier();
    for (var cc = 0u; cc < KEYS; cc++) {
      let g = small_a[r * KEYS + cc];
      for (var i = 0u; i < COLS; i++) { dq[i] += g * tile_c[cc * HD_MAX + c + i * KEYS]; }
    }
  }
  if (t >= dims.T) { return; }
  let at_q = qkv_at(b, t, 0u, h);
  for (var i = 0u; i < COLS; i++) {
    let j = c + i * KEYS;
    if (j >= dims.hd) { continue; }
    let g = dq[i] * dims.scale;
    if (ACCUMULATE) { dqkv[at_q + j] += g; } else { dqkv[at_q + j] = g; }
  }
}

// tile_a: q rows, tile_b: dy rows, key_k, key_v: the workgroup's k and v; small_a: p, small_b: ds, both [16 query rows × 8 keys].
@compute @workgroup_size(128)
fn backward_dkv(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) groups: vec3<u32>,
  @builtin(local_invocation_index) lid: u32,
) {
  let at = work(wid, groups, DKV_KEYS);
  let b = at.x;
  let h = at.y;
  let s0 = at.z;
  if (b >= dims.batch) { return; }
  for (var e = lid; e < DKV_KEYS * HD_MAX; e += 128u) {
    key_k[e] = qkv_tile(b, h, 1u, s0, e);
    key_v[e] = qkv_tile(b, h, 2u, s0, e);
  }
  // Scores: invocation (r, c) is query row q0 + r, key s0 + c. Sums: (key kc, head columns slice + 16·i).
  let r = lid / DKV_KEYS;
  let c = lid % DKV_KEYS;
  let kc = lid / 16u;
  let slice = lid % 16u;
  var dk = array<f32, COLS>(0.0, 0.0, 0.0, 0.0);
  var dv = array<f32, COLS>(0.0, 0.0, 0.0, 0.0);
  let first = select(0u, s0 / ROWS, CAUSAL);
  let tiles = (dims.T + ROWS - 1u) / ROWS;
  for (var qt = first; qt < tiles; qt++) {
    let q0 = qt * ROWS;
    workgroupBarrier();
    for (var e = lid; e < ROWS * HD_MAX; e += 128u) {
      tile_a[e] = qkv_tile(b, h, 0u, q0, e);
      tile_b[e] = dy_tile(b, h, q0, e);
    }
    workgroupBarrier();
    let t = q0 + r;
    var p = 0.0;
    var ds = 0.0;
    if (visible(t, s0 + c)) {
      p = exp(dot_a_key_k(r, c) * dims.scale - lse[row_at(b, h, t)]);
      ds = p * (dot_b_key_v(r, c) - delta[row_at(b, h, t)]);
    }
    small_a[lid] = p;
    small_b[lid] = ds;
    workgroupBarrier();
    for (var rr = 0u; rr < ROWS; rr++) {
      let pr = small_a[rr * DKV_KEYS + kc];
      let dr = small_b[rr * DKV_KEYS + kc];
      for (var i = 0u; i < COLS; i++) {
        let j = rr * HD_MAX + slice + i * 16u;
        dv[i] += pr * tile_b[j];
        dk[i] += dr * tile_a[j];
      }
    }
  }
  let s = s0 + kc;
  if (s >= dims.T) { return; }
  let at_k = qkv_at(b, s, 1u, h);
  let at_v = qkv_at(b, s, 2u, h);
  for (var i = 0u; i < COLS; i++) {
    let j = slice + i * 16u;
    if (j >= dims.hd) { continue; }
    let gk = dk[i] * dims.scale;
    if (ACCUMULATE) {
      dqkv[at_k + j] += gk;
      dqkv[at_v + j] += dv[i];
    } else {
      dqkv[at_k + j] = gk;
      dqkv[at_v + j] = dv[i];
    }
  }
}
