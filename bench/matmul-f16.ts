/**
 * The f16 matmul programs of --precision f16-mixed (src/nn/ops/linear/kernel.ts) against each other and
 * against the f32 path, at a linear layer's three products (forward x·Wᵀ, dW = dyᵀ·x, dx = dy·W) for the
 * words transformer (rows 8,192 = batch 256 × context 32, width 64) and GPT-2's width 768 (--gpt2-rows,
 * default 1,024: one sequence). Per product: 'direct' (matmul_f16.wgsl, before), the table's choice
 * (matmul_wide_f16 on a CPU adapter, matmul_tiled_f16 on a GPU), and f32 as linear plans it (matmul.ts's
 * table; dW with its split over K). Each is compiled by one untimed run, then timed in rounds that
 * alternate the three: `--reps` runs recorded into one submit, then a wait. Figures: milliseconds of the
 * process's CPU time (the software adapters run kernels on its threads) and of wall time per run, median
 * over rounds. Needs 'shader-f16' (Deno's lavapipe here):
 *
 *   node_modules/.bin/deno run -A bench/matmul-f16.ts --json [--reps 1 --rounds 3 --only words|gpt2]
 *
 * Prints one JSON line with --json: {"adapter","runtime","reps","rounds","products":[{"shape","layer","product",
 * "m","n","k","chosen","direct_cpu_ms","chosen_cpu_ms","f32_cpu_ms","direct_wall_ms","chosen_wall_ms","f32_wall_ms"}]}.
 */
import { acquireGpu } from '../src/gpu/device.ts';
import type { Dispatch, Gpu } from '../src/gpu/gpu.ts';
import { timeRuns } from './gpu-timing.ts';
import type { MatmulShape } from '../src/gpu/kernels/matmul.ts';
import { planMatmulSteps } from '../src/gpu/kernels/matmul-slices.ts';
import { chooseF16Variant, halfWords, planCastF16, planMatmulF16 } from '../src/nn/ops/linear/kernel.ts';
import { seededUniform } from '../src/engine/random.ts';
import { args, opt } from './args.ts';

const json = args.includes('--json');
const reps = Number(opt('reps', '1'));
const rounds = Number(opt('rounds', '3'));
const only = opt('only', '');
const gpt2Rows = Number(opt('gpt2-rows', '1024'));

/** [shape, layer, in, out, rows] */
const LAYERS: [string, string, number, number, number][] = [
  ['words', 'qkv', 64, 192, 8192],
  ['words', 'proj', 64, 64, 8192],
  ['words', 'fc', 64, 256, 8192],
  ['words', 'fc2', 256, 64, 8192],
  ['gpt2', 'qkv', 768, 2304, gpt2Rows],
  ['gpt2', 'proj', 768, 768, gpt2Rows],
  ['gpt2', 'fc', 768, 3072, gpt2Rows],
  ['gpt2', 'fc2', 3072, 768, gpt2Rows],
];

/** The three products of a linear layer as matmul.ts shapes: forward, weight gradient, input gradient. */
function products(inF: number, outF: number, rows: number): [string, MatmulShape][] {
  return [
    ['forward', { m: rows, n: outF, k: inF, transB: true }],
    ['dW', { m: outF, n: inF, k: rows, transA: true }],
    ['dx', { m: rows, n: inF, k: outF }],
  ];
}

function random(n: number, seed: number): Float32Array {
  const u = seededUniform(seed);
  return Float32Array.from({ length: n }, () => u() * 2 - 1);
}

/** The three plans of one product over shared operands (f32, and their f16 casts made once, untimed). */
async function planThree(gpu: Gpu, o: MatmulShape): Promise<{ plans: Dispatch[][]; free: () => void }> {
  const a = gpu.upload(random(o.m * o.k, 1));
  const b = gpu.upload(random(o.k * o.n, 2));
  const [c, flag] = [gpu.storage(o.m * o.n), gpu.storage(1)];
  const [a16, b16] = [gpu.storage(halfWords(o.m * o.k)), gpu.storage(halfWords(o.k * o.n))];
  gpu.record([planCastF16(gpu, a, a16, o.m * o.k, flag), planCastF16(gpu, b, b16, o.k * o.n, flag)]);
  const scratch: ReturnType<Gpu['storage']>[] = [];
  const plans = [
    [planMatmulF16(gpu, a16, b16, c, { ...o, variant: 'direct' })],
    [planMatmulF16(gpu, a16, b16, c, o)],
    planMatmulSteps(gpu, a, b, c, o, (words) => {
      const s = gpu.storage(words);
      scratch.push(s);
      return s;
    }),
  ];
  await gpu.sync();
  return { plans, free: () => [a, b, c, flag, a16, b16, ...scratch].forEach((x) => x.destroy()) };
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)]!;
const round1 = (v: number) => Math.round(v * 10) / 10;

async function timeProduct(gpu: Gpu, o: MatmulShape): Promise<Record<string, number>> {
  const { plans, free } = await planThree(gpu, o);
  for (const steps of plans) {
    gpu.record(steps); // compiles and runs once, untimed
    await gpu.sync();
  }
  const times: { cpu: number; wall: number }[][] = plans.map(() => []);
  for (let r = 0; r < rounds; r++)
    for (let v = 0; v < plans.length; v++) times[v]!.push(await timeRuns(gpu, plans[v]!, reps));
  free();
  const cpu = (v: number) => round1(median(times[v]!.map((t) => t.cpu)));
  const wall = (v: number) => round1(median(times[v]!.map((t) => t.wall)));
  return {
    direct_cpu_ms: cpu(0),
    chosen_cpu_ms: cpu(1),
    f32_cpu_ms: cpu(2),
    direct_wall_ms: wall(0),
    chosen_wall_ms: wall(1),
    f32_wall_ms: wall(2),
  };
}

async function main(): Promise<void> {
  const gpu = await acquireGpu();
  const out = [];
  for (const [shape, layer, inF, outF, rows] of LAYERS) {
    if (only && shape !== only) continue;
    for (const [product, o] of products(inF, outF, rows)) {
      const chosen = chooseF16Variant(gpu, o);
      const row = { shape, layer, product, m: o.m, n: o.n, k: o.k, chosen, ...(await timeProduct(gpu, o)) };
      out.push(row);
      if (!json) console.log(JSON.stringify(row));
    }
  }
  const report = { adapter: gpu.info.description, runtime: gpu.info.runtime, reps, rounds, products: out };
  if (json) console.log(JSON.stringify(report));
  gpu.destroy();
}

await main();
