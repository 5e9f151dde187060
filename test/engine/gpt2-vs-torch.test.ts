/**
 * 50 AdamW steps of a 2-layer GPT-2-shaped model against PyTorch: both start
 * from the same weights (a Hugging Face GPT-2 file that
 * test/reference/gpt2_reference.py writes, loaded here as `train --init-from`
 * loads it), see the same batches and use the same AdamW (β 0.9/0.999, ε 1e-8,
 * decoupled weight decay 0.01 on every tensor, constant lr). PyTorch runs the
 * module written in that script, in float64 on the CPU; every one of our f32
 * GPU losses must be within 1e-3 of its loss at the same step. Run twice: with
 * a position table of one row per context position, and with GPT-2's longer
 * table (24 rows, a window of 16: PyTorch reads wpe[:16]), whose unread rows
 * must come out as PyTorch's do (zero gradient, decay only).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flatFromHfGpt2 } from '../../src/checkpoint/hf-gpt2.ts';
import { loadHfWeights } from '../../src/checkpoint/hf-gpt2.node.ts';
import { createOptimizer } from '../../src/engine/optimizer.ts';
import { Transformer } from '../../src/engine/transformer.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';

const script = fileURLToPath(new URL('../reference/gpt2_reference.py', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'ringtrain-gpt2-torch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SPEC = { vocab: 40, context: 16, layers: 2, width: 32, heads: 4, arch: 'gpt2' as const };
const STEPS = 50;
const BATCH = 8;
const LR = 3e-3;
const WEIGHT_DECAY = 0.01;

function python(args: string[]): string {
  const run = spawnSync('/usr/bin/python3', [script, ...args], { encoding: 'utf8', timeout: 600_000 });
  if (run.status !== 0) throw new Error(`gpt2_reference.py ${args[0]} failed: ${run.stderr || run.error}`);
  return run.stdout;
}

/**
 * Windows of a token stream with something to learn (each token mostly follows
 * from the one before), drawn by a seeded LCG: inputs and next-token targets.
 */
function batches(): { inputs: number[][][]; targets: number[][][] } {
  let x = 12345;
  const next = () => (x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const stream = [0];
  for (let i = 1; i < 4000; i++)
    stream.push(next() < 0.8 ? (stream[i - 1] * 7 + 3) % SPEC.vocab : Math.floor(next() * SPEC.vocab));
  const inputs: number[][][] = [];
  const targets: number[][][] = [];
  for (let s = 0; s < STEPS; s++) {
    const starts = Array.from({ length: BATCH }, () => Math.floor(next() * (stream.length - SPEC.context - 1)));
    inputs.push(starts.map((a) => stream.slice(a, a + SPEC.context)));
    targets.push(starts.map((a) => stream.slice(a + 1, a + SPEC.context + 1)));
  }
  return { inputs, targets };
}

describe('a GPT-2-shaped model trains as PyTorch does', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  for (const positions of [SPEC.context, 24]) {
    it(
      `${STEPS} AdamW steps from the same weights and batches, ${positions} positions for a context of ${SPEC.context}: every loss within 1e-3 of PyTorch's (float64), and wpe's rows too`,
      { timeout: 600_000 },
      async () => {
        const file = join(dir, `init-${positions}.safetensors`);
        python([
          'make',
          file,
          '--vocab',
          String(SPEC.vocab),
          '--layers',
          String(SPEC.layers),
          '--width',
          String(SPEC.width),
          '--positions',
          String(positions),
          '--seed',
          '11',
        ]);
        const data = batches();
        const batchFile = join(dir, 'batches.json');
        writeFileSync(batchFile, JSON.stringify(data));
        const reference = JSON.parse(
          python([
            'train',
            file,
            batchFile,
            '--heads',
            String(SPEC.heads),
            '--lr',
            String(LR),
            '--weight-decay',
            String(WEIGHT_DECAY),
          ]),
        ) as { losses: number[]; wpe: number[][] };

        const model = new Transformer(gpu, { ...SPEC, positions });
        let wpe = new Float32Array(0);
        const optimizer = createOptimizer(model, {
          kind: 'adamw',
          lr: LR,
          weightDecay: WEIGHT_DECAY,
          betas: [0.9, 0.999],
          eps: 1e-8,
        });
        const ours: number[] = [];
        try {
          model.writeParams(flatFromHfGpt2(loadHfWeights(file), model.layout, model.flatLength, file));
          for (let s = 0; s < STEPS; s++) {
            ours.push(
              await model.forwardBackward(Float32Array.from(data.inputs[s].flat()), data.targets[s].flat(), BATCH),
            );
            optimizer.step();
          }
          const entry = model.layout.find((e) => e.name === 'pos.weight')!;
          wpe = (await model.readParams()).slice(entry.offset, entry.offset + entry.length);
        } finally {
          optimizer.destroy();
          model.destroy();
        }
        const worst = Math.max(...ours.map((l, s) => Math.abs(l - reference.losses[s])));
        expect(
          worst,
          `ours ${ours.map((l) => l.toFixed(4)).join(' ')}\ntorch ${reference.losses.map((l) => l.toFixed(4)).join(' ')}`,
        ).toBeLessThan(1e-3);
        expect(wpe.length).toBe(positions * SPEC.width);
        const rowErr = (from: number, to: number) =>
          Math.max(
            0,
            ...reference.wpe
              .slice(from, to)
              .flatMap((row, r) => row.map((v, c) => Math.abs(v - wpe[(from + r) * SPEC.width + c]))),
          );
        // The trained rows drift as f32 does; the unread rows (only decayed, (1 − lr·wd)^steps) must match closely.
        expect(rowErr(0, SPEC.context), 'the rows the window reads').toBeLessThan(1e-3);
        expect(rowErr(SPEC.context, positions), 'the rows past the window').toBeLessThan(1e-6);
        // The run must learn, or equal losses prove little.
        expect(reference.losses[STEPS - 1]).toBeLessThan(reference.losses[0] - 0.5);
        console.log(
          `gpt2 vs torch (${positions} positions): first loss ${ours[0].toFixed(5)} (torch ${reference.losses[0].toFixed(5)}), last ${ours[STEPS - 1].toFixed(5)} (torch ${reference.losses[STEPS - 1].toFixed(5)}), worst |Δ| ${worst.toExponential(2)}`,
        );
      },
    );
  }
});
