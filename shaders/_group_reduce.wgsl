// A part (imported with `// #import _group_reduce`; shaders.ts): reductions across the GROUP invocations
// of a workgroup, each invocation giving one value and every invocation getting the result. Call them in
// workgroup-uniform control flow (they hold barriers), from entry points of @workgroup_size(GROUP).
// This flavour is a tree in workgroup memory, in a fixed order: the same bits on every adapter. Modules
// compiled `+subgroups` get _group_reduce.subgroups.wgsl instead, the same functions on subgroup operations.
//   groupSum(lid, v)        Σ v
//   groupSum2(lid, v)       Σ v for a vec2 (two sums for the barriers of one)
//   groupMaxArg(lid, z, k)  the largest z, and the smallest k among the invocations that hold it

const GROUP = 64u;
// What an invocation with nothing to offer gives groupMaxArg.
const NO_VALUE = -3.4e38;
const NO_INDEX = 0xffffffffu;

struct MaxArg { value: f32, index: u32 }

var<workgroup> groupSums: array<f32, GROUP>;
var<workgroup> groupSums2: array<vec2<f32>, GROUP>;
var<workgroup> groupMaxes: array<f32, GROUP>;
var<workgroup> groupArgs: array<u32, GROUP>;

fn groupSum(lid: u32, v: f32) -> f32 {
  groupSums[lid] = v;
  workgroupBarrier();
  for (var half = GROUP / 2u; half > 0u; half >>= 1u) {
    if (lid < half) { groupSums[lid] += groupSums[lid + half]; }
    workgroupBarrier();
  }
  let total = groupSums[0];
  workgroupBarrier(); // a next call writes groupSums[0] again
  return total;
}

fn groupSum2(lid: u32, v: vec2<f32>) -> vec2<f32> {
  groupSums2[lid] = v;
  workgroupBarrier();
  for (var half = GROUP / 2u; half > 0u; half >>= 1u) {
    if (lid < half) { groupSums2[lid] += groupSums2[lid + half]; }
    workgroupBarrier();
  }
  let total = groupSums2[0];
  workgroupBarrier();
  return total;
}

fn groupMaxArg(lid: u32, z: f32, k: u32) -> MaxArg {
  groupMaxes[lid] = z;
  groupArgs[lid] = k;
  workgroupBarrier();
  for (var half = GROUP / 2u; half > 0u; half >>= 1u) {
    if (lid < half) {
      let z2 = groupMaxes[lid + half];
      let k2 = groupArgs[lid + half];
      if (z2 > groupMaxes[lid] || (z2 == groupMaxes[lid] && k2 < groupArgs[lid])) { groupMaxes[lid] = z2; groupArgs[lid] = k2; }
    }
    workgroupBarrier();
  }
  let top = MaxArg(groupMaxes[0], groupArgs[0]);
  workgroupBarrier();
  return top;
}
