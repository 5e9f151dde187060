// The subgroup flavour of _group_reduce.wgsl (the same functions; modules compiled `+subgroups`, whose
// text starts with `enable subgroups;`). Each subgroup reduces its values with one subgroup operation;
// workgroup memory only combines the subgroups' results, with two barriers a call where the tree has
// seven. WGSL says neither which invocations form a subgroup nor that subgroups are full, so nothing here
// assumes it: a subgroup's result goes to the slot of its elected invocation and every other slot holds
// the identity; each subgroup folds the GROUP slots with its lanes striding over them, and invocation 0's
// fold is what every invocation returns. The order of the additions depends on how the adapter forms
// subgroups and orders a subgroupAdd: fixed per adapter (deterministic there), not across adapters.

const GROUP = 64u;
const NO_VALUE = -3.4e38;
const NO_INDEX = 0xffffffffu;

struct MaxArg { value: f32, index: u32 }

var<workgroup> groupSlots: array<f32, GROUP>;
var<workgroup> groupSlots2: array<vec2<f32>, GROUP>;
var<workgroup> groupSlotArgs: array<u32, GROUP>;
var<workgroup> groupResult: vec2<f32>;
var<workgroup> groupResultArg: u32;

// x: this invocation's rank among its subgroup's active invocations; y: how many are active.
fn subgroupLanes() -> vec2<u32> {
  return vec2<u32>(subgroupExclusiveAdd(1u), subgroupAdd(1u));
}

fn groupSum(lid: u32, v: f32) -> f32 {
  groupSlots[lid] = select(0.0, subgroupAdd(v), subgroupElect());
  workgroupBarrier();
  let lanes = subgroupLanes();
  var fold = 0.0;
  for (var k = lanes.x; k < GROUP; k += lanes.y) { fold += groupSlots[k]; }
  let total = subgroupAdd(fold);
  if (lid == 0u) { groupResult.x = total; }
  workgroupBarrier();
  // No third barrier: a next call writes the slots and the result only after its own first barrier,
  // which every invocation reaches after reading this one's.
  return groupResult.x;
}

fn groupSum2(lid: u32, v: vec2<f32>) -> vec2<f32> {
  groupSlots2[lid] = select(vec2<f32>(0.0), subgroupAdd(v), subgroupElect());
  workgroupBarrier();
  let lanes = subgroupLanes();
  var fold = vec2<f32>(0.0);
  for (var k = lanes.x; k < GROUP; k += lanes.y) { fold += groupSlots2[k]; }
  let total = subgroupAdd(fold);
  if (lid == 0u) { groupResult = total; }
  workgroupBarrier();
  return groupResult;
}

fn groupMaxArg(lid: u32, z: f32, k: u32) -> MaxArg {
  let m = subgroupMax(z);
  let first = subgroupMin(select(NO_INDEX, k, z == m));
  let elected = subgroupElect();
  groupSlots[lid] = select(NO_VALUE, m, elected);
  groupSlotArgs[lid] = select(NO_INDEX, first, elected);
  workgroupBarrier();
  let lanes = subgroupLanes();
  var best = NO_VALUE;
  var at = NO_INDEX;
  for (var j = lanes.x; j < GROUP; j += lanes.y) {
    let z2 = groupSlots[j];
    let k2 = groupSlotArgs[j];
    if (z2 > best || (z2 == best && k2 < at)) { best = z2; at = k2; }
  }
  let gm = subgroupMax(best);
  let gk = subgroupMin(select(NO_INDEX, at, best == gm));
  if (lid == 0u) { groupResult.x = gm; groupResultArg = gk; }
  workgroupBarrier();
  return MaxArg(groupResult.x, groupResultArg);
}
