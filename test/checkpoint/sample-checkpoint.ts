/**
 * A small training checkpoint with fixed contents (weights of several shapes,
 * AdamW moments, metadata with non-ASCII text), for comparing writers.
 * test/checkpoint/fixtures/writer-ef2ca4a.safetensors holds it as the
 * in-memory writer of commit ef2ca4a (before checkpoints were streamed)
 * wrote it: encodeCheckpoint(sampleCheckpoint()) there.
 */
import type { TrainingCheckpoint } from '../../src/checkpoint/checkpoint.ts';

function values(n: number, seed: number): Float32Array {
  // A fixed integer recurrence, so every runtime makes the same floats (negative, tiny, large).
  let s = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return ((s / 2 ** 32) * 2 - 1) * 10 ** ((s % 7) - 3);
  });
}

export function sampleCheckpoint(): TrainingCheckpoint {
  const params = {
    'blocks.0.qkv.weight': { shape: [12, 4], data: values(48, 1) },
    'blocks.0.qkv.bias': { shape: [12], data: values(12, 2) },
    'head.weight': { shape: [5, 4], data: values(20, 3) },
    empty: { shape: [0], data: new Float32Array(0) },
  };
  const flat = 48 + 12 + 20;
  return {
    model: 'transformer',
    optimizer: 'adamw',
    step: 37,
    epoch: 2,
    layoutHash: 'abcdef01',
    params,
    optimizerState: { m: values(flat, 4), v: values(flat, 5).map(Math.abs), step: new Float32Array([37]) },
    extra: { seed: '7', vocabulary: '{"tokens":"chars","symbols":[97,233,8364]} é€' },
  };
}
