/**
 * What `train --dry-run --json` reports, for a transformer of any vocabulary:
 * the CLI's text data sets the vocabulary from the text (characters, or bytes),
 * so GPT-2's 50,257 tokens are only reachable here until a tokenizer lands.
 * Plans on a planning-only Gpu with the adapter's limits (nothing is allocated
 * on the adapter); one JSON line per context × batch, or the refusal.
 *
 *   deno run -A bench/plan-memory.ts --layers 12 --width 768 --heads 12 --vocab 50257 --contexts 128,1024 --batches 1,8
 *
 * `--micro-batches 0,1` plans each shape unsplit (0) and in passes of each micro-batch given
 * (`train --micro-batch`); one that does not divide the batch is skipped.
 */
import { planDryRun } from '../src/cli/commands/dry-run.ts';
import { acquireGpu } from '../src/gpu/device.ts';
import { opt } from './args.ts';

const ints = (name: string, fallback: string) => opt(name, fallback).split(',').map(Number);
const [layers, width, heads, vocab] = ['layers', 'width', 'heads', 'vocab'].map((k, i) =>
  Number(opt(k, ['12', '768', '12', '50257'][i])),
);
const gpu = await acquireGpu();
const shapes = ints('contexts', '128,1024').flatMap((context) =>
  ints('batches', '1,8').flatMap((batch) =>
    ints('micro-batches', '0')
      .filter((micro) => micro === 0 || batch % micro === 0)
      .map((micro) => ({ context, batch, micro: micro || undefined })),
  ),
);
for (const { context, batch, micro } of shapes) {
  const shape = { layers, width, heads, vocab, context, batch, micro_batch: micro ?? null };
  try {
    const spec = { kind: 'transformer' as const, seed: 1, layers, width, heads, vocab, context };
    const r = planDryRun(gpu, spec, {
      model: 'transformer',
      batch,
      optimizer: 'adamw',
      lr: 1e-3,
      momentum: 0.9,
      weightDecay: 0.01,
      microBatch: micro,
    });
    console.log(
      JSON.stringify({
        ...shape,
        params: r.params,
        planned_gpu_bytes: r.planned_gpu_bytes,
        by_part: r.planned_gpu_bytes_by_part,
        largest_buffer: r.largest_buffer,
        runtime: r.runtime,
        limits: r.limits,
      }),
    );
  } catch (err) {
    console.log(JSON.stringify({ ...shape, refused: err instanceof Error ? err.message : String(err) }));
  }
}
gpu.destroy();
