/**
 * GPT-2's architecture as the transformer's shape, without a GPU: the parameter
 * count of GPT-2 small from the shapes alone (the reference's list and the
 * engine's module agree), the tied head (no head tensor), and GPT-2's
 * initialisation drawn by the module's own parameters.
 */
import { describe, expect, it } from 'vitest';
import { resolveTransformerSpec, TransformerModule } from '../../src/engine/transformer.ts';
import { seededNormal, seededUniform } from '../../src/nn/random.ts';
import { transformerParamCount, transformerTensorShapes } from '../../src/reference/transformer.ts';

const GPT2_SMALL = { vocab: 50_257, context: 1024, layers: 12, width: 768, heads: 12, arch: 'gpt2' as const };

function moduleShapes(spec: Parameters<typeof resolveTransformerSpec>[0]): [string, number[]][] {
  const module = new TransformerModule(resolveTransformerSpec(spec));
  module.nameTree();
  return module.namedParameters().map(([name, p]) => [name, [...p.shape]]);
}

const count = (shapes: [string, number[]][]) => shapes.reduce((n, [, s]) => n + s.reduce((a, b) => a * b, 1), 0);

describe("GPT-2's architecture", () => {
  it('counts 124,439,808 parameters at 12 layers, width 768, 12 heads, context 1024 and 50,257 tokens', () => {
    expect(transformerParamCount(GPT2_SMALL)).toBe(124_439_808);
    const shapes = moduleShapes(GPT2_SMALL);
    expect(count(shapes)).toBe(124_439_808);
    expect(shapes).toEqual(transformerTensorShapes(GPT2_SMALL));
  });

  it("keeps GPT-2's 1,024 positions at a shorter context: 124,439,808 parameters at context 128, one pos.weight row per position", () => {
    const window128 = { ...GPT2_SMALL, context: 128, positions: 1024 };
    expect(transformerParamCount(window128)).toBe(124_439_808);
    const shapes = moduleShapes(window128);
    expect(count(shapes)).toBe(124_439_808);
    expect(shapes.find(([n]) => n === 'pos.weight')![1]).toEqual([1024, 768]);
    // Without positions the table has a row per context position, as before.
    expect(transformerParamCount({ ...GPT2_SMALL, context: 128 })).toBe(124_439_808 - 896 * 768);
  });

  it('refuses a context longer than the positions, naming both', () => {
    expect(() => resolveTransformerSpec({ context: 64, positions: 32 })).toThrow(
      /context 64 is longer than its 32 positions/,
    );
  });

  it('ties the head to tok.weight: no head tensor, and the classic model keeps its own (105,627 at the words size)', () => {
    const names = moduleShapes({ ...GPT2_SMALL, vocab: 27, context: 32, layers: 2, width: 64, heads: 4 }).map(
      ([n]) => n,
    );
    expect(names.filter((n) => n.startsWith('head'))).toEqual([]);
    const classic = moduleShapes({});
    expect(count(classic)).toBe(105_627);
    expect(classic.slice(-2).map(([n]) => n)).toEqual(['head.weight', 'head.bias']);
  });

  it("draws GPT-2's init: weights N(0, 0.02²), residual projections N(0, (0.02/√(2·layers))²), biases 0, LayerNorm 1 and 0", () => {
    const layers = 4;
    const module = new TransformerModule(
      resolveTransformerSpec({ vocab: 300, context: 64, layers, width: 128, heads: 4, arch: 'gpt2' }),
    );
    module.nameTree();
    const rand = { uniform: seededUniform(3), normal: seededNormal(4) };
    const values = new Map(
      module.namedParameters().map(([name, p]) => {
        const out = new Float32Array(p.shape.reduce((a, b) => a * b, 1));
        p.init(out, rand);
        return [name, out];
      }),
    );
    const std = (x: Float32Array) => Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length);
    for (const name of ['tok.weight', 'pos.weight', 'blocks.0.qkv.weight', 'blocks.3.fc.weight'])
      expect(std(values.get(name)!), name).toBeCloseTo(0.02, 3);
    for (const name of ['blocks.0.proj.weight', 'blocks.3.out.weight'])
      expect(std(values.get(name)!), name).toBeCloseTo(0.02 / Math.sqrt(2 * layers), 3);
    for (const name of [
      'blocks.0.qkv.bias',
      'blocks.1.proj.bias',
      'blocks.2.fc.bias',
      'blocks.3.out.bias',
      'lnf.bias',
      'blocks.0.ln1.bias',
    ])
      expect(
        values.get(name)!.every((v) => v === 0),
        name,
      ).toBe(true);
    for (const name of ['lnf.weight', 'blocks.2.ln2.weight'])
      expect(
        values.get(name)!.every((v) => v === 1),
        name,
      ).toBe(true);
  });

  it('refuses an unknown arch, naming the choices', () => {
    expect(() => resolveTransformerSpec({ arch: 'gpt3' as never })).toThrow(
      /arch must be one of classic, gpt2, got "gpt3"/,
    );
  });
});
