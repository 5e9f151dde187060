/**
 * Initial weights drawn in pieces (engine/initial-weights.ts), without a GPU: the same numbers, bit
 * for bit, as drawing every parameter whole in layout order from the model's two seeded streams
 * (what a model's constructor always did), for GPT-2's initialisation (streamed: drawn a piece at a
 * time), the classic transformer's and an MLP's He weights (drawn transposed: whole); and a timer
 * scheduled before the draw runs before it resolves (the event loop turned while it drew).
 */
import { describe, expect, it } from 'vitest';
import { drawInitialWeights, drawInitialWeightsInPieces } from '../../src/engine/initial-weights.ts';
import { layoutOf } from '../../src/engine/graph-model.ts';
import { resolveTransformerSpec, TransformerModule } from '../../src/engine/transformer.ts';
import { isStreamed } from '../../src/nn/init.ts';
import type { Module } from '../../src/nn/module.ts';
import { Linear } from '../../src/nn/ops/index.ts';
import { Sequential } from '../../src/nn/index.ts';
import { seededNormal, seededUniform } from '../../src/nn/random.ts';

function parametersOf(module: Module) {
  module.nameTree();
  const named = module.namedParameters();
  return { parameters: named.map(([, p]) => p), ...layoutOf(named) };
}

/** The oracle: each parameter's init over its whole range, in layout order, from the same two streams. */
function drawnWhole(m: ReturnType<typeof parametersOf>, seed: number): Float32Array {
  const out = new Float32Array(m.flatLength);
  const rand = { uniform: seededUniform(seed), normal: seededNormal(seed ^ 0x9e3779b9) };
  m.parameters.forEach((p, i) =>
    p.init(out.subarray(m.layout[i].offset, m.layout[i].offset + m.layout[i].length), rand),
  );
  return out;
}

const transformer = (arch: 'gpt2' | 'classic') =>
  parametersOf(
    new TransformerModule(resolveTransformerSpec({ vocab: 1100, context: 32, layers: 2, width: 64, heads: 4, arch })),
  );

/** The first index where the two differ as f32 bits (-1: none), and their lengths: vitest's toEqual is slow on big arrays. */
function firstDifference(got: Float32Array, want: Float32Array): { length: number; at: number } {
  const [g, w] = [got, want].map((a) => new Uint32Array(a.buffer, a.byteOffset, a.length));
  return { length: g.length - w.length, at: w.findIndex((v, i) => g[i] !== v) };
}
const same = { length: 0, at: -1 };

describe('initial weights drawn in pieces', () => {
  it.each([
    ['gpt2', 7],
    ['classic', 3],
  ] as const)('draws the %s transformer bit for bit as a whole draw does (seed %i)', async (arch, seed) => {
    const m = transformer(arch);
    const want = drawnWhole(m, seed);
    // The token table is bigger than a piece: it is drawn in several.
    expect(isStreamed(m.parameters[0].init)).toBe(true);
    expect(firstDifference(drawInitialWeights(m.parameters, m.layout, m.flatLength, seed), want)).toEqual(same);
    const inPieces = await drawInitialWeightsInPieces(m.parameters, m.layout, m.flatLength, seed, 0);
    expect(firstDifference(inPieces, want)).toEqual(same);
  });

  it("draws an MLP's He weights (transposed, so drawn whole) as a whole draw does", async () => {
    const m = parametersOf(new Sequential(new Linear(300, 400, { init: 'he' }), new Linear(400, 10, { init: 'he' })));
    expect(isStreamed(m.parameters[0].init)).toBe(false);
    const got = await drawInitialWeightsInPieces(m.parameters, m.layout, m.flatLength, 5, 0);
    expect(firstDifference(got, drawnWhole(m, 5))).toEqual(same);
  });

  it('lets a timer scheduled before it run before it resolves', async () => {
    const m = transformer('gpt2');
    let ran = false;
    setTimeout(() => (ran = true), 0);
    await drawInitialWeightsInPieces(m.parameters, m.layout, m.flatLength, 1, 0);
    expect(ran).toBe(true);
  });
});
