/**
 * Hugging Face's GPT-2 layout in (what `train --init-from` does, through the
 * same functions) and refused: an independent Python script
 * (test/reference/gpt2_reference.py) writes random GPT-2 weights in that layout,
 * F32, F16 and BF16, and computes GPT-2's logits in float64 with numpy; the GPU
 * model loaded from the file must give the same logits to 1e-4 relative. A file
 * that does not fit is refused naming the tensor (and both shapes).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flatFromHfGpt2 } from '../../src/checkpoint/hf-gpt2.ts';
import { loadHfWeights } from '../../src/checkpoint/hf-gpt2.node.ts';
import { layoutOf } from '../../src/engine/graph-model.ts';
import { predictNextTokens } from '../../src/engine/predict.ts';
import { resolveTransformerSpec, Transformer, TransformerModule } from '../../src/engine/transformer.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';

const script = fileURLToPath(new URL('../reference/gpt2_reference.py', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'ringtrain-hf-gpt2-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The model under test: 2 layers, width 32, 4 heads, context 16, 22 tokens; files hold 24 positions (GPT-2's longer table). */
const SPEC = { vocab: 22, context: 16, layers: 2, width: 32, heads: 4, arch: 'gpt2' as const };

function python(args: string[]): string {
  const run = spawnSync('/usr/bin/python3', [script, ...args], { encoding: 'utf8', timeout: 300_000 });
  if (run.status !== 0) throw new Error(`gpt2_reference.py ${args[0]} failed: ${run.stderr || run.error}`);
  return run.stdout;
}

function makeHfFile(
  name: string,
  o: {
    dtype?: string;
    extras?: boolean;
    untie?: boolean;
    layers?: number;
    width?: number;
    positions?: number;
    vocab?: number;
    seed?: number;
  } = {},
): string {
  const path = join(dir, name);
  const n = (v: number | undefined, d: number) => String(v ?? d);
  python([
    'make',
    path,
    '--vocab',
    n(o.vocab, SPEC.vocab),
    '--layers',
    n(o.layers, SPEC.layers),
    '--width',
    n(o.width, SPEC.width),
    '--positions',
    n(o.positions, 24),
    '--seed',
    n(o.seed, 3),
    '--dtype',
    o.dtype ?? 'F32',
    ...(o.extras ? ['--hf-extras'] : []),
    ...(o.untie ? ['--untie'] : []),
  ]);
  return path;
}

/** Rows of 1..context token ids, seeded. */
const ROWS = [[1], [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19], [21, 0, 3, 3, 20, 2, 9]];

/** The module's layout without a GPU: what the loader maps onto. */
function layout(spec: Partial<typeof SPEC> = {}) {
  const module = new TransformerModule(resolveTransformerSpec({ ...SPEC, ...spec }));
  module.nameTree();
  return layoutOf(module.namedParameters());
}

describe("Hugging Face's GPT-2 layout in", () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  for (const [dtype, extras] of [
    ['F32', false],
    ['F16', true],
    ['BF16', true],
  ] as const) {
    it(`loads ${dtype}${extras ? " (GPT2LMHeadModel's names, mask buffers and tied lm_head)" : ''}: logits = numpy's float64 GPT-2 to 1e-4`, async () => {
      const file = makeHfFile(`gpt2-${dtype}.safetensors`, { dtype, extras });
      const rowsFile = join(dir, 'rows.json');
      writeFileSync(rowsFile, JSON.stringify(ROWS));
      const expected = (
        JSON.parse(python(['logits', file, rowsFile, '--heads', String(SPEC.heads)])) as { logits: number[][] }
      ).logits;
      const model = new Transformer(gpu, SPEC);
      try {
        model.writeParams(flatFromHfGpt2(loadHfWeights(file), model.layout, model.flatLength, file));
        const got = await predictNextTokens(model, ROWS);
        ROWS.forEach((_, r) => {
          const scale = Math.max(...expected[r].map(Math.abs));
          const worst = Math.max(...expected[r].map((v, c) => Math.abs(v - got.logits[r][c])));
          expect(worst / scale, `row ${r}: worst |Δ| ${worst} against logits up to ${scale}`).toBeLessThan(1e-4);
          expect(got.nextTokens[r]).toBe(expected[r].indexOf(Math.max(...expected[r])));
        });
        // The weights must make the rows differ, or equal logits prove little.
        expect(new Set(got.nextTokens).size).toBeGreaterThan(1);
      } finally {
        model.destroy();
      }
    });
  }

  it("keeps a file's 24 positions whole at a window of 8 (positions 24): logits = numpy's (which reads wpe[:T]) to 1e-4", async () => {
    const file = makeHfFile('gpt2-positions.safetensors');
    const rows = [[1], [4, 5, 6, 7, 8, 9, 10, 11], [21, 0, 3]];
    const rowsFile = join(dir, 'rows-8.json');
    writeFileSync(rowsFile, JSON.stringify(rows));
    const expected = (
      JSON.parse(python(['logits', file, rowsFile, '--heads', String(SPEC.heads)])) as { logits: number[][] }
    ).logits;
    const model = new Transformer(gpu, { ...SPEC, context: 8, positions: 24 });
    try {
      const flat = flatFromHfGpt2(loadHfWeights(file), model.layout, model.flatLength, file);
      const pos = model.layout.find((e) => e.name === 'pos.weight')!;
      expect(pos.shape).toEqual([24, SPEC.width]);
      // Every wpe row, bit for bit.
      expect(flat.slice(pos.offset, pos.offset + pos.length)).toEqual(loadHfWeights(file)['wpe.weight'].data);
      model.writeParams(flat);
      const got = await predictNextTokens(model, rows);
      rows.forEach((_, r) => {
        const scale = Math.max(...expected[r].map(Math.abs));
        expect(Math.max(...expected[r].map((v, c) => Math.abs(v - got.logits[r][c]))) / scale, `row ${r}`).toBeLessThan(
          1e-4,
        );
      });
    } finally {
      model.destroy();
    }
  });
});

describe("Hugging Face's GPT-2 layout refused", () => {
  const refusal = (file: string, spec: Partial<typeof SPEC> = {}) => {
    const l = layout(spec);
    try {
      flatFromHfGpt2(loadHfWeights(file), l.layout, l.flatLength, file);
    } catch (err) {
      return (err as Error).message;
    }
    throw new Error(`${file} loaded into ${JSON.stringify(spec)}`);
  };

  it('a tensor of another shape, naming it and both shapes', () => {
    const file = makeHfFile('wide.safetensors', { width: 48 });
    expect(refusal(file)).toContain("tensor 'wte.weight' has shape [22, 48], but this model needs [22, 32]");
  });

  it('too few positions, a missing tensor, extra layers and an untied head, each by name', () => {
    expect(refusal(makeHfFile('short.safetensors', { positions: 8 }))).toContain(
      "tensor 'wpe.weight' has shape [8, 32], but this model needs [16, 32] (at least that many positions)",
    );
    expect(refusal(makeHfFile('one-layer.safetensors', { layers: 1 }))).toContain(
      "has no tensor 'h.1.ln_1.weight' (the model needs it with shape [32])",
    );
    expect(refusal(makeHfFile('three-layers.safetensors', { layers: 3 }))).toContain(
      'has tensors this model does not: h.2.ln_1.weight [32]',
    );
    expect(refusal(makeHfFile('other-vocab.safetensors', { vocab: 30 }))).toContain(
      "tensor 'wte.weight' has shape [30, 32], but this model needs [22, 32]",
    );
    expect(refusal(makeHfFile('untied.safetensors', { extras: true, untie: true }))).toContain(
      'lm_head.weight differs from wte.weight',
    );
    // The same file with its head tied loads.
    const tied = makeHfFile('tied.safetensors', { extras: true });
    const l = layout();
    expect(flatFromHfGpt2(loadHfWeights(tied), l.layout, l.flatLength, tied).length).toBe(l.flatLength);
  });
});
