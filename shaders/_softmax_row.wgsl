// A part (`// #import _softmax_row`, after `// #import _group_reduce`): one row of logits reduced by the
// GROUP invocations of a workgroup, each striding over the classes: the largest logit, the first class
// that holds it (as argmax picks) and Σ exp(z − max). What cross_entropy.wgsl's `rows` and
// linear_cross_entropy.wgsl's `stats` share; the importing shader declares `logits: array<f32>` and a
// `dims` uniform with `classes`. One invocation looping over every class was wrong past 32,768 classes
// on lavapipe, whose shaders stop a loop after 65,535 iterations in all (Mesa's llvmpipe cap).

struct SoftmaxRow { zmax: f32, argmax: u32, sum: f32 }

fn softmaxRow(base: u32, lid: u32) -> SoftmaxRow {
  var zmax = NO_VALUE;
  var best = NO_INDEX;
  for (var j = lid; j < dims.classes; j += GROUP) {
    let z = logits[base + j];
    if (z > zmax) { zmax = z; best = j; }
  }
  let top = groupMaxArg(lid, zmax, best);
  var part = 0.0;
  for (var j = lid; j < dims.classes; j += GROUP) { part += exp(logits[base + j] - top.value); }
  return SoftmaxRow(top.value, top.index, groupSum(lid, part));
}
