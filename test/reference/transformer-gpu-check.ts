/**
 * The GPU transformer against the CPU reference (src/reference/), runtime-agnostic
 * so Node (vitest) and Deno (a spawned script) run the same check: the GPU
 * model's weights are read back and handed to the reference by name, then
 * logits, the batch loss and gradients (against f64 central differences of
 * the reference's loss) are compared.
 *
 * The default size is small (context 8, width 16): the words workload's size
 * runs the same code, but its matmuls pick the wide kernel, whose pipelines
 * take SwiftShader minutes to compile (measured: 15–28 s each).
 */
import { wordsDataset } from '../../src/data/words.ts';
import { Transformer, type TransformerSpec } from '../../src/engine/transformer.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import {
  transformerLogits,
  transformerLoss,
  transformerTensorShapes,
  transformerWeights,
} from '../../src/reference/transformer.ts';

export interface TransformerCheck {
  layoutMatches: boolean;
  paramCount: number;
  /** max |GPU − CPU| over every logit of the batch. */
  worstLogit: number;
  loss: number;
  referenceLoss: number;
  /** [tensor, index, GPU gradient, finite difference] */
  grads: [string, number, number, number][];
}

export const SMALL: Omit<TransformerSpec, 'kind'> = { seed: 5, context: 8, width: 16, heads: 2, layers: 2 };

/** GPT-2's architecture at the same small size: tied head, tanh GELU, GPT-2's init. */
export const SMALL_GPT2: Omit<TransformerSpec, 'kind'> = { ...SMALL, arch: 'gpt2' };
/** The weight scale of SMALL_GPT2's check (see checkTransformer). */
export const GPT2_CHECK_SCALE = 25;

/**
 * Entries whose gradient is checked, one per kind of tensor, at places the words below reach (d = width).
 * GPT-2 has no head: its probe moves to tok.weight's row of 'e', whose gradient sums the embedding's and the tied
 * head's.
 */
function probes(d: number, gpt2: boolean): [string, number][] {
  return [
    ['tok.weight', 1 * d + 5], // letter 'a'
    ['pos.weight', 3 * d + 7],
    ['blocks.0.ln1.weight', 9],
    ['blocks.0.qkv.weight', (d + 6) * d + 3], // a key row
    ['blocks.0.qkv.bias', 2 * d + 12], // a value entry
    ['blocks.0.proj.weight', 11 * d + 2],
    ['blocks.1.fc.weight', (2 * d + 4) * d + 9],
    ['blocks.1.out.bias', 4],
    ['lnf.bias', 13],
    gpt2 ? ['tok.weight', 5 * d + 1] : ['head.weight', 5 * d + 1], // letter 'e'
  ];
}

/**
 * `weightScale` multiplies the initial weights first: GPT-2's init (std 0.02) leaves a small model's
 * gradients below what a finite difference resolves, so its check runs on weights 25× as spread.
 */
export async function checkTransformer(
  gpu: Gpu,
  spec: Omit<TransformerSpec, 'kind'> = SMALL,
  weightScale = 1,
): Promise<TransformerCheck> {
  const model = new Transformer(gpu, spec);
  const s = model.shape;
  try {
    if (weightScale !== 1) model.writeParams((await model.readParams()).map((v) => v * weightScale));
    const flat = await model.readParams();
    const named = Object.fromEntries(
      model.layout.map((e) => [e.name, { shape: e.shape, data: flat.subarray(e.offset, e.offset + e.length) }]),
    );
    const layoutMatches =
      JSON.stringify(model.layout.map((e) => [e.name, e.shape])) === JSON.stringify(transformerTensorShapes(s));
    const w = transformerWeights(named, s.heads);
    const words = wordsDataset(
      ['a', 'zebra', 'tee', 'ringtra', 'qwertyuiopasdfghjklzxcvbnm'.slice(0, s.context - 1)],
      s.context,
    );
    const n = words.count;
    const t = s.context;
    const logits = await model.predict(words.inputs, n);
    let worstLogit = 0;
    for (let e = 0; e < n; e++) {
      const ref = transformerLogits(w, words.inputs.subarray(e * t, (e + 1) * t));
      ref.forEach((v, i) => (worstLogit = Math.max(worstLogit, Math.abs(v - logits[e * ref.length + i]))));
    }
    const loss = await model.forwardBackward(words.inputs, words.labels, n);
    const referenceLoss = transformerLoss(w, words.inputs, words.labels, t).loss;
    const gradsFlat = await model.readGrads();
    const grads = probes(s.width, s.arch === 'gpt2').map(([name, k]): [string, number, number, number] => {
      const entry = model.layout.find((e) => e.name === name)!;
      const values = w.tensors[name];
      const keep = values[k];
      const eps = 1e-5;
      values[k] = keep + eps;
      const up = transformerLoss(w, words.inputs, words.labels, t).loss;
      values[k] = keep - eps;
      const down = transformerLoss(w, words.inputs, words.labels, t).loss;
      values[k] = keep;
      return [name, k, gradsFlat[entry.offset + k], (up - down) / (2 * eps)];
    });
    return { layoutMatches, paramCount: model.paramCount, worstLogit, loss, referenceLoss, grads };
  } finally {
    model.destroy();
  }
}
