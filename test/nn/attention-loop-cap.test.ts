/**
 * Attention on llvmpipe: a shape whose query rows pass the adapter's 65,535-iteration loop cap is
 * refused (naming the context that fits), not run to a wrong result. The boundary itself runs on
 * lavapipe in the Deno oracle run (attention.cases.ts, T = 480 at heads of 64).
 */
import { describe, expect, it } from 'vitest';
import { checkAttentionLoopCap } from '../../src/nn/ops/attention/kernel.ts';

const LAVAPIPE = 'llvmpipe (LLVM 15.0.6, 256 bits)';

describe('attention on an adapter with a loop cap', () => {
  it("refuses GPT-2's context 1024 and 512 at heads of 64 on llvmpipe, naming the longest context that fits", () => {
    for (const T of [481, 512, 1024]) {
      expect(() => checkAttentionLoopCap(LAVAPIPE, { batch: 1, T, heads: 12, width: 768 })).toThrow(
        /--context 480 or less.*--runtime node/,
      );
    }
  });

  it('lets T = 480 through on llvmpipe, smaller heads further, and any length elsewhere', () => {
    expect(() => checkAttentionLoopCap(LAVAPIPE, { batch: 1, T: 480, heads: 12, width: 768 })).not.toThrow();
    expect(() => checkAttentionLoopCap(LAVAPIPE, { batch: 1, T: 1024, heads: 32, width: 768 })).not.toThrow();
    expect(() =>
      checkAttentionLoopCap('google SwiftShader driver 5.0.0', { batch: 1, T: 1024, heads: 12, width: 768 }),
    ).not.toThrow();
  });
});
