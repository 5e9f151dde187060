/**
 * Subgroups (docs/KERNELS.md, "Subgroups"): the shader loader's parts and `+subgroups` keys, and which
 * pipelines a Gpu plans by its capability. The kernels' results, both variants against f64 references,
 * are oracle cases (`… (subgroups)` in test/nn/ops/*.cases.ts and test/oracles/dense-cases.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/core/errors.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Dispatch, Gpu } from '../../src/gpu/gpu.ts';
import { chooseReduction } from '../../src/gpu/kernels/common.ts';
import { planColumnSum } from '../../src/gpu/kernels/reduce-rows.ts';
import { planningGpu } from '../../src/gpu/planning-device.ts';
import { moduleSource, registerShaders } from '../../src/gpu/shaders.ts';
import { planCrossEntropy } from '../../src/nn/ops/cross-entropy/kernel.ts';
import { planLayerNormBackward, planLayerNormForward } from '../../src/nn/ops/layernorm/kernel.ts';
import { planRowReduceBackward, planRowReduceForward } from '../../src/nn/ops/row-reduce/kernel.ts';
import { planSoftmaxBackward, planSoftmaxForward } from '../../src/nn/ops/softmax/kernel.ts';

describe('the reductions a Gpu plans', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  /** The labels of every reduction kernel's dispatches, planned (never run) on `g`. */
  function reductionLabels(g: Gpu): string[] {
    const [x, y, w, stats, red, rowStats, result] = [
      g.storage(64 * 96),
      g.storage(64 * 96),
      g.storage(96),
      g.storage(128),
      g.storage(64),
      g.storage(3 * 64),
      g.storage(4),
    ];
    const shape = { rows: 64, cols: 96 };
    const targets = g.storage(64);
    const steps: Dispatch[] = [
      planLayerNormForward(g, shape, { x, weight: w, bias: w, y, stats }),
      ...planLayerNormBackward(g, shape, { x, weight: w, stats, dy: y, dx: x, dweight: w, dbias: w }),
      planSoftmaxForward(g, x, y, 64, 96),
      planSoftmaxBackward(g, y, y, x, 64, 96),
      planRowReduceForward(g, 'mean', x, red, shape),
      planRowReduceForward(g, 'max', x, red, shape),
      planRowReduceBackward(g, 'max', x, red, y, shape),
      ...planCrossEntropy(g, { logits: x, targets, dlogits: y, rowStats, result }, 64, 96),
      ...planColumnSum(g, rowStats, result, { rows: 64, cols: 3 }),
    ];
    return steps.map((d) => d.label);
  }

  it('uses subgroups where the adapter offers them (Dawn on SwiftShader does), unless told not to', async () => {
    expect(gpu.subgroups).toBe(gpu.device.features.has('subgroups'));
    expect(gpu.subgroups, `${gpu.info.description} should offer subgroups under Node (SwiftShader does)`).toBe(true);
    const off = await acquireGpu({ subgroups: false });
    try {
      expect(off.subgroups).toBe(false);
      expect(off.device.features.has('subgroups')).toBe(false);
    } finally {
      off.destroy();
    }
  });

  /** `gpu` as a planning Gpu that reports a hardware adapter (what chooses the row kernels; nothing runs). */
  function asHardware(g: Gpu): Gpu {
    return planningGpu({ ...g, info: { ...g.info, isFallbackAdapter: false } } as Gpu);
  }

  it('plans the subgroup pipelines on a Gpu with subgroups, the row kernels per row on a CPU adapter', () => {
    const hardware = reductionLabels(asHardware(gpu));
    expect(hardware).toEqual([
      'layernorm+subgroups:forward_rows',
      'layernorm+subgroups:backward_input_rows',
      'layernorm:backward_params', // one chunk of 64 rows: no column sum
      'softmax+subgroups:forward_rows',
      'softmax+subgroups:backward_rows',
      'row_reduce+subgroups:mean_forward_rows',
      'row_reduce+subgroups:max_forward_rows',
      'row_reduce+subgroups:max_backward_rows',
      'cross_entropy+subgroups:rows',
      'reduce_rows+subgroups:tree',
      'cross_entropy:total',
      'cross_entropy:scale',
      'reduce_rows+subgroups:tree',
    ]);
    // SwiftShader is a fallback adapter: one invocation per row stays cheaper there than a workgroup per row.
    expect(gpu.info.isFallbackAdapter).toBe(true);
    const cpu = reductionLabels(planningGpu(gpu));
    expect(cpu.filter((l) => l.includes('+subgroups'))).toEqual([
      'cross_entropy+subgroups:rows',
      'reduce_rows+subgroups:tree',
      'reduce_rows+subgroups:tree',
    ]);
    expect(cpu).toContain('layernorm:forward');
    for (const g of [planningGpu(gpu, { subgroups: false }), asHardware(planningGpu(gpu, { subgroups: false }))]) {
      const without = reductionLabels(g);
      expect(without.filter((l) => l.includes('+subgroups'))).toEqual([]);
      expect(without).toContain('cross_entropy:rows');
    }
  });

  it('refuses to force the subgroup variant on a Gpu without subgroups, naming what to do', () => {
    const without = planningGpu(gpu, { subgroups: false });
    expect(chooseReduction(without)).toBe('workgroup');
    expect(chooseReduction(without, 'workgroup')).toBe('workgroup');
    expect(() => chooseReduction(without, 'subgroup')).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidArgument, message: expect.stringMatching(/'workgroup'/) }),
    );
  });
});

// After the Gpu above: acquireGpu reads shaders/ only into an empty registry.
describe('shader parts', () => {
  beforeAll(() =>
    registerShaders({
      test_sg_user: '// user\n// #import _test_sg_a\n// #import _test_sg_b\nfn main() {}',
      _test_sg_a: 'fn a() {}',
      '_test_sg_a.subgroups': 'fn a() { /* subgroups */ }',
      _test_sg_b: '// #import _test_sg_a\nfn b() {}',
      test_sg_cycle: '// #import _test_sg_c',
      _test_sg_c: '// #import _test_sg_d',
      _test_sg_d: '// #import _test_sg_c',
      test_sg_not_part: '// #import test_sg_user',
    }),
  );

  it('inlines each imported part once, and the .subgroups flavour under a +subgroups key', () => {
    const plain = moduleSource('test_sg_user');
    expect(plain).toBe('// user\nfn a() {}\n// (_test_sg_a is imported above)\nfn b() {}\nfn main() {}');
    const flavoured = moduleSource('test_sg_user+subgroups');
    expect(flavoured.split('\n')[0]).toBe('enable subgroups;');
    expect(flavoured).toContain('fn a() { /* subgroups */ }');
    expect(flavoured).not.toContain('fn a() {}');
  });

  it('refuses a cycle and an import of a shader that is not a part, naming them', () => {
    expect(() => moduleSource('test_sg_cycle')).toThrow(/_test_sg_c → _test_sg_d → _test_sg_c/);
    expect(() => moduleSource('test_sg_not_part')).toThrow(/"test_sg_user", which is not a part/);
  });
});
