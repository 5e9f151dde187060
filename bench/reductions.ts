/**
 * The reduction kernels with and without subgroups, on one adapter, in one run (docs/KERNELS.md,
 * "Subgroups"): layer norm forward + backward, softmax forward + backward, row mean and max, and
 * cross-entropy's rows at a GPT-2-ish shape, and the column-sum tree of a loss total. Each kernel's
 * dispatches are planned once per variant (the plan functions' `reduction` option), compiled by one
 * untimed run, then timed in rounds that alternate the variants: `--reps` runs recorded into one
 * submit, then a wait. The figure to read on the CPU adapters is the process's CPU time per run
 * (the software adapters run kernels on the process's own threads), with the median of the
 * per-round ratios subgroup / workgroup. An adapter without subgroups times the workgroup variant
 * alone (Deno's lavapipe).
 *
 *   npx tsx bench/reductions.ts --json                   # Node (SwiftShader, or Dawn on a GPU)
 *   npx tsx bench/reductions.ts --rows 1024 --width 768 --vocab 50257 --ce-rows 256 --reps 3 --rounds 3
 *
 * Prints one JSON line with --json: {"adapter","runtime","subgroups","shapes",
 * "kernels":[{"kernel","workgroup_cpu_ms","subgroup_cpu_ms","ratio","workgroup_wall_ms","subgroup_wall_ms"}]}.
 */
import { acquireGpu } from '../src/gpu/device.ts';
import type { Dispatch, Gpu } from '../src/gpu/gpu.ts';
import { timeRuns } from './gpu-timing.ts';
import type { Reduction } from '../src/gpu/kernels/common.ts';
import { planSumTree } from '../src/gpu/kernels/reduce-rows.ts';
import { planCrossEntropy } from '../src/nn/ops/cross-entropy/kernel.ts';
import { planLayerNormBackward, planLayerNormForward } from '../src/nn/ops/layernorm/kernel.ts';
import { planRowReduceBackward, planRowReduceForward } from '../src/nn/ops/row-reduce/kernel.ts';
import { planSoftmaxBackward, planSoftmaxForward } from '../src/nn/ops/softmax/kernel.ts';
import { seededUniform } from '../src/engine/random.ts';
import { args, opt } from './args.ts';

const json = args.includes('--json');
const rows = Number(opt('rows', '1024'));
const width = Number(opt('width', '768'));
const vocab = Number(opt('vocab', '50257'));
const ceRows = Number(opt('ce-rows', '256'));
const sumRows = Number(opt('sum-rows', '65536'));
const reps = Number(opt('reps', '3'));
const rounds = Number(opt('rounds', '3'));

function random(n: number, seed: number, scale = 1): Float32Array {
  const u = seededUniform(seed);
  return Float32Array.from({ length: n }, () => (u() * 2 - 1) * scale);
}

/** Each kernel family's dispatches for one variant, over buffers both variants share. */
function planKernels(gpu: Gpu): Record<string, (r: Reduction) => Dispatch[]> {
  const n = rows * width;
  const [x, dy, w, b] = [
    gpu.upload(random(n, 1, 3)),
    gpu.upload(random(n, 2)),
    gpu.upload(random(width, 3)),
    gpu.upload(random(width, 4)),
  ];
  const [y, dx, stats, dw, db, red] = [
    gpu.storage(n),
    gpu.storage(n),
    gpu.storage(2 * rows),
    gpu.storage(width),
    gpu.storage(width),
    gpu.storage(rows),
  ];
  const shape = { rows, cols: width };
  const logits = gpu.upload(random(ceRows * vocab, 5, 20));
  const u = seededUniform(6);
  const targets = gpu.upload(Int32Array.from({ length: ceRows }, () => Math.floor(u() * vocab)));
  const ce = {
    logits,
    targets,
    dlogits: gpu.storage(ceRows * vocab),
    rowStats: gpu.storage(3 * ceRows),
    result: gpu.storage(4),
  };
  const sumSrc = gpu.upload(random(sumRows, 7));
  const lnBuffers = { x, weight: w, stats, dy, dx, dweight: dw, dbias: db };
  return {
    layerNorm: (r) => [
      planLayerNormForward(gpu, shape, { x, weight: w, bias: b, y, stats }, r),
      ...planLayerNormBackward(gpu, shape, lnBuffers, { reduction: r }),
    ],
    softmax: (r) => [
      planSoftmaxForward(gpu, x, y, rows, width, r),
      planSoftmaxBackward(gpu, y, dy, dx, rows, width, false, r),
    ],
    rowMean: (r) => [planRowReduceForward(gpu, 'mean', x, red, shape, r)],
    rowMax: (r) => [
      planRowReduceForward(gpu, 'max', x, red, shape, r),
      planRowReduceBackward(gpu, 'max', x, red, dx, shape, r),
    ],
    crossEntropy: (r) => planCrossEntropy(gpu, ce, ceRows, vocab, { reduction: r }),
    sumTree: (r) => planSumTree(gpu, sumSrc, ce.result, sumRows, { reduction: r }),
  };
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)]!;

async function main(): Promise<void> {
  const gpu = await acquireGpu();
  const variants: Reduction[] = gpu.subgroups ? ['workgroup', 'subgroup'] : ['workgroup'];
  const out = [];
  for (const [kernel, plan] of Object.entries(planKernels(gpu))) {
    const planned = variants.map((v) => plan(v));
    for (const steps of planned) {
      gpu.record(steps); // compiles and runs once, untimed
      await gpu.sync();
    }
    const times: { cpu: number; wall: number }[][] = variants.map(() => []);
    for (let round = 0; round < rounds; round++)
      for (let v = 0; v < variants.length; v++) times[v]!.push(await timeRuns(gpu, planned[v]!, reps));
    const [wg, sg] = times;
    const row = {
      kernel,
      workgroup_cpu_ms: median(wg!.map((t) => t.cpu)),
      subgroup_cpu_ms: sg ? median(sg.map((t) => t.cpu)) : null,
      ratio: sg ? median(sg.map((t, i) => t.cpu / wg![i]!.cpu)) : null,
      workgroup_wall_ms: median(wg!.map((t) => t.wall)),
      subgroup_wall_ms: sg ? median(sg.map((t) => t.wall)) : null,
    };
    out.push(row);
    if (!json) console.log(JSON.stringify(row));
  }
  const report = {
    adapter: gpu.info.description,
    runtime: gpu.info.runtime,
    subgroups: gpu.subgroups,
    shapes: { rows, width, vocab, ceRows, sumRows, reps, rounds },
    kernels: out,
  };
  if (json) console.log(JSON.stringify(report));
  gpu.destroy();
}

await main();
