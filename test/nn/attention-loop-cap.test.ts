/**
 * Attention on llvmpipe: a shape whose invocations pass the adapter's 65,535-iteration loop cap is
 * refused (naming the context that fits), not run to a wrong result. The tiled kernels split a query
 * row's work over invocations, so GPT-2's context 1024 at heads of 64 fits; it runs on lavapipe in the
 * Deno oracle run (attention.cases.ts), as does the row kernel's boundary, T = 480 at heads of 64.
 */
import { describe, expect, it } from 'vitest';
import { checkAttentionLoopCap, chooseAttentionKernel } from '../../src/nn/ops/attention/kernel.ts';

const LAVAPIPE = 'llvmpipe (LLVM 15.0.6, 256 bits)';
const SWIFTSHADER = 'google SwiftShader driver 5.0.0';

describe('attention on an adapter with a loop cap', () => {
  it("runs GPT-2's context 1024 at heads of 64 on llvmpipe with the tiled kernel", () => {
    const gpt2 = { batch: 8, T: 1024, heads: 12, width: 768 };
    expect(chooseAttentionKernel(gpt2)).toBe('tiled');
    expect(() => checkAttentionLoopCap(LAVAPIPE, gpt2)).not.toThrow();
  });

  it('refuses the row kernel past T = 480 at heads of 64 on llvmpipe, naming the longest context that fits', () => {
    for (const T of [481, 512, 1024]) {
      expect(() => checkAttentionLoopCap(LAVAPIPE, { batch: 1, T, heads: 12, width: 768 }, 'rows')).toThrow(
        /--context 480 or less.*--runtime node/,
      );
    }
    expect(() => checkAttentionLoopCap(LAVAPIPE, { batch: 1, T: 480, heads: 12, width: 768 }, 'rows')).not.toThrow();
  });

  it('refuses heads over 64 dimensions (the row kernel) past its cap, pointing at more heads', () => {
    const wide = { batch: 1, T: 512, heads: 6, width: 768 };
    expect(chooseAttentionKernel(wide)).toBe('rows');
    expect(() => checkAttentionLoopCap(LAVAPIPE, wide)).toThrow(/--context 247 or less, heads of 64 dimensions/);
  });

  it('refuses the tiled kernel past its own cap, and lets any length through elsewhere', () => {
    const long = { batch: 1, T: 8192, heads: 12, width: 768 };
    expect(() => checkAttentionLoopCap(LAVAPIPE, long)).toThrow(/\(tiled kernel\).*--context 4352 or less/);
    expect(() => checkAttentionLoopCap(LAVAPIPE, { ...long, T: 4352 })).not.toThrow();
    expect(() => checkAttentionLoopCap(SWIFTSHADER, long)).not.toThrow();
    expect(() => checkAttentionLoopCap(SWIFTSHADER, { ...long, heads: 6 })).not.toThrow();
  });

  it('picks the kernel by shape alone: rows below T = 384 or over 64 dimensions a head, tiled otherwise', () => {
    expect(chooseAttentionKernel({ batch: 256, T: 32, heads: 4, width: 64 })).toBe('rows');
    expect(chooseAttentionKernel({ batch: 1, T: 383, heads: 1, width: 64 })).toBe('rows');
    expect(chooseAttentionKernel({ batch: 1, T: 384, heads: 1, width: 64 })).toBe('tiled');
    expect(chooseAttentionKernel({ batch: 1, T: 384, heads: 1, width: 65 })).toBe('rows');
  });
});
