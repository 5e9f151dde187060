/**
 * Attention's two kernels side by side (src/nn/ops/attention): the row kernel that keeps the
 * [batch, heads, T, T] probabilities and the tiled one that keeps only each row's log-sum-exp.
 *
 * Structure, planned on a planning-only Gpu (nothing allocated): the dispatches of one forward +
 * backward with their workgroup counts, and the scratch bytes each kernel keeps between forward and
 * backward, at --shape (default GPT-2's per layer: batch 8, 12 heads, T 1024, width 768).
 * Time, on this adapter: the best of --rounds runs of forward + backward for each kernel at each of
 * --times contexts (batch 1, --heads, --width), both kernels in the same run, alternating.
 *
 *   deno run -A bench/attention.ts --json
 *   npx tsx bench/attention.ts --times 64,128,256 --heads 4 --width 64   (the row kernel passes llvmpipe's loop cap past
 *   T = 480 at heads of 64: keep --times below that under Deno)
 */
import { acquireGpu } from '../src/gpu/device.ts';
import type { Dispatch, Gpu } from '../src/gpu/gpu.ts';
import { planningGpu } from '../src/gpu/planning-device.ts';
import {
  type AttentionKernel,
  type AttentionShape,
  chooseAttentionKernel,
  planAttentionBackward,
  planAttentionForward,
} from '../src/nn/ops/attention/kernel.ts';
import { planTiledAttentionBackward, planTiledAttentionForward } from '../src/nn/ops/attention/tiled-kernel.ts';
import { args, opt } from './args.ts';

const json = args.includes('--json');
const [batch, heads, T, width] = opt('shape', '8,12,1024,768').split(',').map(Number);
const times = opt('times', '64,128,256,384').split(',').map(Number);
const rounds = Number(opt('rounds', '3'));

/** One forward + backward of `kernel`, with its scratch, on `gpu`'s buffers. */
function plan(gpu: Gpu, s: AttentionShape, kernel: AttentionKernel): { steps: Dispatch[]; scratchBytes: number } {
  const nq = s.batch * s.T * 3 * s.width;
  const ny = s.batch * s.T * s.width;
  const [qkv, y, dy, dqkv] = [gpu.storage(nq), gpu.storage(ny), gpu.storage(ny), gpu.storage(nq)];
  if (kernel === 'rows') {
    const words = s.batch * s.heads * s.T * s.T;
    const [probs, dscores] = [gpu.storage(words), gpu.storage(words)];
    const steps = [
      planAttentionForward(gpu, s, { qkv, y, probs }),
      ...planAttentionBackward(gpu, s, { qkv, probs, dy, dscores, dqkv }),
    ];
    return { steps, scratchBytes: 8 * words };
  }
  const rows = s.batch * s.heads * s.T;
  const [lse, delta] = [gpu.storage(rows), gpu.storage(rows)];
  const steps = [
    planTiledAttentionForward(gpu, s, { qkv, y, lse }),
    ...planTiledAttentionBackward(gpu, s, { qkv, y, lse, dy, delta, dqkv }),
  ];
  return { steps, scratchBytes: 8 * rows };
}

const structure = (steps: Dispatch[]) =>
  steps.map((d) => ({ label: d.label, workgroups: d.workgroups.reduce((a, b) => a * b, 1) }));

const gpu = await acquireGpu();
const planner = planningGpu(gpu);
const shape: AttentionShape = { batch, heads, T, width };
// A kernel this adapter refuses at the shape (the row kernel past llvmpipe's loop cap) says why.
const structural = (['rows', 'tiled'] as const).map((kernel) => {
  try {
    const { steps, scratchBytes } = plan(planner, shape, kernel);
    return { kernel, dispatches: structure(steps), scratch_bytes: scratchBytes };
  } catch (err) {
    return { kernel, refused: err instanceof Error ? err.message : String(err) };
  }
});

async function timeOnce(s: AttentionShape, kernel: AttentionKernel, steps: Dispatch[]): Promise<number> {
  await gpu.sync();
  const t0 = performance.now();
  gpu.record(steps);
  await gpu.sync();
  return performance.now() - t0;
}

const timed: { T: number; chosen: AttentionKernel; rows_ms: number; tiled_ms: number }[] = [];
for (const t of times) {
  const s: AttentionShape = { batch: 1, heads: Number(opt('heads', '12')), T: t, width: Number(opt('width', '768')) };
  const plans = { rows: plan(gpu, s, 'rows').steps, tiled: plan(gpu, s, 'tiled').steps };
  const best = { rows: Infinity, tiled: Infinity };
  for (let r = 0; r <= rounds; r++) {
    for (const kernel of ['rows', 'tiled'] as const) {
      const ms = await timeOnce(s, kernel, plans[kernel]);
      if (r > 0) best[kernel] = Math.min(best[kernel], ms); // round 0 compiles the pipelines
    }
  }
  timed.push({ T: t, chosen: chooseAttentionKernel(s), rows_ms: best.rows, tiled_ms: best.tiled });
}

const report = {
  bench: 'attention',
  adapter: gpu.info.description,
  runtime: gpu.info.runtime,
  shape,
  structural,
  timed,
};
if (json) console.log(JSON.stringify(report));
else console.dir(report, { depth: 5 });
gpu.destroy();
