import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { decodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { isRingtrainError } from '../../src/core/errors.ts';
import { wordsDataset } from '../../src/data/words.ts';
import { transformerDecoder } from '../../src/reference/decode.ts';
import { erf, gelu } from '../../src/reference/math.ts';
import { initTransformerTensors } from '../../src/reference/sample.ts';
import {
  transformerLogits,
  transformerLoss,
  transformerParamCount,
  transformerWeights,
  WORDS_TRANSFORMER,
} from '../../src/reference/transformer.ts';

const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url);

/** Decodes 32 tokens one at a time (KV cache) and checks each step's logits against the full forward pass; returns the full decoder. */
function expectDecoderMatchesFullPass(w: ReturnType<typeof transformerWeights>): ReturnType<typeof transformerDecoder> {
  const tokens = Array.from({ length: 32 }, (_, i) => (i * 11 + 3) % 27);
  const full = transformerLogits(w, tokens);
  const decoder = transformerDecoder(w);
  let worst = 0;
  tokens.forEach((tok, i) =>
    decoder.push(tok).forEach((v, c) => (worst = Math.max(worst, Math.abs(v - full[i * 27 + c])))),
  );
  expect(worst).toBeLessThan(1e-12);
  return decoder;
}

describe('the CPU reference transformer', () => {
  it('has the 105,627 parameters of the spec, under the PyTorch module names', () => {
    expect(transformerParamCount(WORDS_TRANSFORMER)).toBe(105_627);
    const t = initTransformerTensors(WORDS_TRANSFORMER, 1);
    expect(Object.values(t).reduce((n, x) => n + x.data.length, 0)).toBe(105_627);
    expect(Object.keys(t).slice(0, 6)).toEqual([
      'tok.weight',
      'pos.weight',
      'blocks.0.ln1.weight',
      'blocks.0.ln1.bias',
      'blocks.0.qkv.weight',
      'blocks.0.qkv.bias',
    ]);
    expect(t['blocks.1.out.weight'].shape).toEqual([64, 256]);
    expect(t['head.weight'].shape).toEqual([27, 64]);
    // PyTorch's default ranges: Linear U(±1/√in), so fc (in 64) ≤ 0.125 and out (in 256) ≤ 0.0625.
    expect(Math.max(...t['blocks.0.fc.weight'].data.map(Math.abs))).toBeLessThanOrEqual(0.125);
    expect(Math.max(...t['blocks.0.out.weight'].data.map(Math.abs))).toBeLessThanOrEqual(0.0625);
    expect(Math.max(...t['blocks.0.out.weight'].data.map(Math.abs))).toBeGreaterThan(0.06);
  });

  it("gives PyTorch's logits (gpt_ref.py's module, float64) to 1e-12", () => {
    const ref = JSON.parse(readFileSync(fixture('torch-small.json'), 'utf8')) as {
      heads: number;
      tokens: number[];
      logits: number[];
      state_dict_keys: string[];
    };
    const { tensors } = decodeSafetensors(readFileSync(fixture('torch-small.safetensors')));
    expect(Object.keys(tensors)).toEqual(ref.state_dict_keys);
    const w = transformerWeights(tensors, ref.heads);
    expect(w.shape).toEqual({ vocab: 27, context: 8, layers: 2, width: 16, heads: 2 });
    const t = w.shape.context;
    let worst = 0;
    for (let s = 0; s < ref.tokens.length / t; s++) {
      const logits = transformerLogits(w, ref.tokens.slice(s * t, (s + 1) * t));
      logits.forEach((v, i) => (worst = Math.max(worst, Math.abs(v - ref.logits[s * logits.length + i]))));
    }
    expect(worst).toBeLessThan(1e-12);
    // The heads matter: the same weights read as 4 heads are another model.
    const four = transformerLogits(transformerWeights(tensors, 4), ref.tokens.slice(0, t));
    expect(Math.max(...four.map((v, i) => Math.abs(v - ref.logits[i])))).toBeGreaterThan(1e-3);
  });

  it('is causal: a later token changes no earlier logit, and changes its own and later ones', () => {
    const w = transformerWeights(initTransformerTensors(WORDS_TRANSFORMER, 3));
    const tokens = Array.from({ length: 32 }, (_, i) => (i * 7) % 27);
    const a = transformerLogits(w, tokens);
    const changed = [...tokens];
    changed[20] = (changed[20] + 5) % 27;
    const b = transformerLogits(w, changed);
    for (let i = 0; i < 20 * 27; i++) expect(b[i]).toBe(a[i]);
    for (const pos of [20, 21, 31]) {
      const row = (x: Float64Array) => x.subarray(pos * 27, (pos + 1) * 27);
      expect(Math.max(...row(b).map((v, i) => Math.abs(v - row(a)[i])))).toBeGreaterThan(1e-6);
    }
    // A prefix gives the prefix's logits.
    expect([...transformerLogits(w, tokens.slice(0, 9))]).toEqual([...a.subarray(0, 9 * 27)]);
  });

  it('scores a uniform model at ln 27 nats per character over exactly the counted positions', () => {
    const t = initTransformerTensors(WORDS_TRANSFORMER, 4);
    t['head.weight'].data.fill(0);
    t['head.bias'].data.fill(0);
    const words = wordsDataset(['a', 'zebra', 'supercalifragilistic']);
    const uniform = transformerLoss(transformerWeights(t), words.inputs, words.labels, 32);
    expect(uniform.positions).toBe(2 + 6 + 21);
    expect(uniform.loss).toBeCloseTo(Math.log(27), 12);
    // A trained-looking head (bias towards 'a') scores the word 'a' below ln 27 and others above it.
    t['head.bias'].data[1] = 3;
    const w = transformerWeights(t);
    expect(transformerLoss(w, words.inputs.subarray(0, 32), words.labels.subarray(0, 32), 32).totalNats).toBeLessThan(
      2 * Math.log(27) + 1e-9,
    );
    expect(transformerLoss(w, words.inputs.subarray(32), words.labels.subarray(32), 32).loss).toBeGreaterThan(
      Math.log(27),
    );
  });

  it('decodes token by token (KV cache) to the full forward pass', () => {
    const w = transformerWeights(initTransformerTensors(WORDS_TRANSFORMER, 6));
    const decoder = expectDecoderMatchesFullPass(w);
    expect(() => decoder.push(0)).toThrow(/holds 32 positions/);
  });

  it("decodes GPT-2's architecture (tanh GELU, head tied to tok.weight) token by token to the full forward pass", () => {
    const shape = { ...WORDS_TRANSFORMER, arch: 'gpt2' as const };
    const w = transformerWeights(initTransformerTensors(shape, 6));
    expect(w.shape.arch).toBe('gpt2');
    expectDecoderMatchesFullPass(w);
    // Tied: the logits move with tok.weight's rows, and there is no head to read.
    expect(Object.keys(w.tensors).filter((n) => n.startsWith('head'))).toEqual([]);
  });

  it("reads a position table longer than the training window (GPT-2's 1,024 at --context 128) to its last row: generate's limit is the file's positions", () => {
    const shape = { ...WORDS_TRANSFORMER, context: 16, positions: 32, arch: 'gpt2' as const };
    expect(transformerParamCount(shape)).toBe(transformerParamCount({ ...shape, context: 32, positions: undefined }));
    const tensors = initTransformerTensors(shape, 6);
    expect(tensors['pos.weight'].shape).toEqual([32, 64]);
    const w = transformerWeights(tensors);
    expect(w.shape.context).toBe(32);
    const decoder = expectDecoderMatchesFullPass(w);
    expect(() => decoder.push(0)).toThrow(/holds 32 positions/);
  });

  it('uses the exact erf GELU', () => {
    // Values of erf from tables (Abramowitz & Stegun 7.1) and of x·Φ(x).
    expect(erf(0.5)).toBeCloseTo(0.5204998778130465, 14);
    expect(erf(1)).toBeCloseTo(0.8427007929497149, 14);
    expect(erf(2.4)).toBeCloseTo(0.999311486103355, 14);
    expect(erf(2.6)).toBeCloseTo(0.9997639655834706, 14);
    expect(erf(-3)).toBeCloseTo(-0.9999779095030014, 14);
    expect(1 - erf(4)).toBeCloseTo(1.541725790028002e-8, 15); // 1 − erf loses the last digits to f64 rounding near 1
    expect(gelu(1)).toBeCloseTo(0.8413447460685429, 14);
    expect(gelu(-2)).toBeCloseTo(-0.04550026389635842, 14);
  });

  it('refuses weights of another model by tensor name and shape', () => {
    const t = initTransformerTensors(WORDS_TRANSFORMER, 5);
    const grab = (f: () => unknown): unknown => {
      try {
        f();
      } catch (e) {
        return e;
      }
      return undefined;
    };
    const { ['blocks.1.fc.bias']: _, ...missing } = t;
    let err = grab(() => transformerWeights(missing, 4, 'm.safetensors'));
    expect(isRingtrainError(err, 'ERR_BAD_CHECKPOINT') && err.message).toMatch(
      /m\.safetensors has no tensor 'blocks\.1\.fc\.bias'/,
    );
    err = grab(() => transformerWeights({ ...t, 'head.weight': { shape: [10, 64], data: new Float32Array(640) } }));
    expect(String(err)).toMatch(/'head\.weight' has shape \[10,64\].*needs \[27,64\]/);
    err = grab(() =>
      transformerWeights(
        { 'param/fc1.weight': { shape: [128, 784], data: new Float32Array(1) } },
        4,
        'mlp.safetensors',
      ),
    );
    expect(String(err)).toMatch(/mlp\.safetensors is not a transformer's weights.*fc1\.weight/);
    err = grab(() => transformerWeights(t, 5));
    expect(String(err)).toMatch(/5 heads do not divide the width 64/);
    const nan = initTransformerTensors(WORDS_TRANSFORMER, 5);
    nan['lnf.bias'].data[3] = NaN;
    expect(String(grab(() => transformerWeights(nan)))).toMatch(/'lnf\.bias' holds NaN at 3/);
    // A ringtrain training checkpoint's names (param/…, optim/…) load too.
    const prefixed = Object.fromEntries([
      ...Object.entries(t).map(([k, v]) => [`param/${k}`, v]),
      ['optim/m', { shape: [3], data: new Float32Array(3) }],
    ]);
    expect(transformerWeights(prefixed).shape).toEqual(WORDS_TRANSFORMER);
  });
});
