// Multi-head self-attention, fused, reading q, k and v straight out of the
// packed projection qkv [batch, T, 3·D] (columns q | k | v, head h at
// h·hd .. h·hd+hd of each, D = heads·hd: the layout of PyTorch's
// qkv(x).split(D, 2) + view(b, t, H, hd)) and writing y [batch, T, D] with the
// heads side by side (ready for the output projection).
//   forward:     per (b, h, t): p[t, s] = softmax_s(scale · q_t·k_s), s ≤ t when CAUSAL
//                (p saved in probs [batch, H, T, T], 0 above the diagonal), y_t = Σ_s p[t, s] v_s
//   backward_q:  per (b, h, t): dp_s = dy_t·v_s, ds[t, s] = p[t, s] (dp_s − Σ_s' p[t, s'] dp_s')
//                (saved in dscores), dq_t = scale · Σ_s ds[t, s] k_s
//   backward_kv: per (b, h, s): dk_s = scale · Σ_t ds[t, s] q_t,  dv_s = Σ_t p[t, s] dy_t
// The two backward kernels write disjoint columns of dqkv, so neither needs atomics.

struct Dims { batch: u32, T: u32, heads: u32, hd: u32, scale: f32, _a: u32, _b: u32, _c: u32 }

override CAUSAL: bool = true;
override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> probs: array<f32>;
@group(0) @binding(4) var<storage, read> dy: array<f32>;
@group(0) @binding(5) var<storage, read> saved: array<f32>;
@group(0) @binding(6) var<storage, read_write> dscores: array<f32>;
@group(0) @binding(7) var<storage, read_write> dqkv: array<f32>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

// Offset of element 0 of q (part 0), k (1) or v (2) for head h at position t of sample b.
fn qkv_at(b: u32, t: u32, part: u32, h: u32) -> u32 {
  let D = dims.heads * dims.hd;
  return (b * dims.T + t) * 3u * D + part * D + h * dims.hd;
}
fn out_at(b: u32, t: u32, h: u32) -> u32 { return (b * dims.T + t) * dims.heads * dims.hd + h * dims.hd; }
// Row t of the [T × T] score matrix of (b, h).
fn row_at(b: u32, h: u32, t: u32) -> u32 { return ((b * dims.heads + h) * dims.T + t) * dims.T; }
fn last_key(t: u32) -> u32 { return select(dims.T - 1u, t, CAUSAL); }

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.batch * dims.heads * dims.T) { return; }
  let t = i % dims.T;
  let h = (i / dims.T) % dims.heads;
  let b = i / (dims.T * dims.heads);
  let row = row_at(b, h, t);
  let q = qkv_at(b, t, 0u, h);
  let end = last_key(t);
  var m = -3.0e38;
  for (var s = 0u; s <= end; s++) {
    let k = qkv_at(b, s, 1u, h);
    var dot = 0.0;
    for (var j = 0u; j < dims.hd; j++) { dot += qkv[q + j] * qkv[k + j]; }
    let z = dot * dims.scale;
    probs[row + s] = z;
    m = max(m, z);
  }
  var sum = 0.0;
  for (var s = 0u; s <= end; s++) { let e = exp(probs[row + s] - m); probs[row + s] = e; sum += e; }
  let inv = 1.0 / sum;
  for (var s = 0u; s <= end; s++) { probs[row + s] *= inv; }
  for (var s = end + 1u; s < dims.T; s++) { probs[row + s] = 0.0; }
  let o = out_at(b, t, h);
  for (var j = 0u; j < dims.hd; j++) {
    var acc = 0.0;
    for (var s = 0u; s <= end; s++) { acc += probs[row + s] * qkv[qkv_at(b, s, 2u, h) + j]; }
    y[o + j] = acc;
  }
}

@compute @workgroup_size(64)
fn backward_q(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.batch * dims.heads * dims.T) { return; }
  let t = i % dims.T;
  let h = (i / dims.T) % dims.heads;
  let b = i / (dims.T * dims.heads);
  let row = row_at(b, h, t);
  let g = out_at(b, t, h);
  let end = last_key(t);
  var pdp = 0.0;
  for (var s = 0u; s <= end; s++) {
    let v = qkv_at(b, s, 2u, h);
    var dp = 0.0;
    for (var j = 0u; j < dims.hd; j++) { dp += dy[g + j] * qkv[v + j]; }
    dscores[row + s] = dp;
    pdp += saved[row + s] * dp;
  }
  for (var s = 0u; s <= end; s++) { dscores[row + s] = saved[row + s] * (dscores[row + s] - pdp); }
  for (var s = end + 1u; s < dims.T; s++) { dscores[row + s] = 0.0; }
  let dq = qkv_at(b, t, 0u, h);
  for (var j = 0u; j < dims.hd; j++) {
    var acc = 0.0;
    for (var s = 0u; s <= end; s++) { acc += dscores[row + s] * qkv[qkv_at(b, s, 1u, h) + j]; }
    let d = acc * dims.scale;
    if (ACCUMULATE) { dqkv[dq + j] += d; } else { dqkv[dq + j] = d; }
  }
}

@compute @workgroup_size(64)
fn backward_kv(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = index(gid, groups);
  if (i >= dims.batch * dims.heads * dims.T) { return; }
  let s = i % dims.T;
  let h = (i / dims.T) % dims.heads;
  let b = i / (dims.T * dims.heads);
  let first = select(0u, s, CAUSAL);
  let dk = qkv_at(b, s, 1u, h);
  let dv = qkv_at(b, s, 2u, h);
  for (var j = 0u; j < dims.hd; j++) {
    var ak = 0.0;
    var av = 0.0;
    for (var t = first; t < dims.T; t++) {
      let row = row_at(b, h, t);
      ak += dscores[row + s] * qkv[qkv_at(b, t, 0u, h) + j];
      av += saved[row + s] * dy[out_at(b, t, h) + j];
    }
    let k = ak * dims.scale;
    if (ACCUMULATE) { dqkv[dk + j] += k; dqkv[dv + j] += av; } else { dqkv[dk + j] = k; dqkv[dv + j] = av; }
  }
}
