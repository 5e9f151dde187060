/**
 * --precision f16-mixed's activations: a value that backward reads is kept as f16 between its last
 * forward reader and its first backward reader, where it would otherwise hold 4 bytes a number
 * through the whole middle of the step. After the last forward reader a cast (`castF16`, which
 * raises the overflow flag past f16's range, so loss scaling skips that step) stores it in half the
 * words; its f32 buffer is lent to other values in between; before its first backward reader an
 * unpack (`f16.wgsl`) writes the f16 values back as f32. The ops themselves are unchanged: they read
 * and write f32, forward sees the exact values, and backward sees them rounded to f16 (as PyTorch's
 * autocast saves f16 activations). Layer norm, softmax, attention and the loss still compute in f32.
 *
 * The peak of a training step is the start of backward, where every saved activation is alive: this
 * halves them. Each value spilled costs two passes over it (a cast and an unpack).
 */
import type { BufferRange, Gpu } from '../gpu/gpu.ts';
import { planUnpackF16 } from '../gpu/kernels/f16.ts';
import type { Life, Storage, Timeline } from './memory-plan.ts';
import type { Step } from './op.ts';
import { halfWords, planCastF16 } from './ops/linear/kernel.ts';

/** A value stored as f16 between `stowAt` (its last forward moment) and `restoreAt` (its first backward reader). */
export interface Spill {
  storage: Storage;
  stowAt: number;
  restoreAt: number;
  /** Where its f16 copy lives (set when buffers are assigned). */
  half: BufferRange | null;
}

/**
 * The values worth spilling: f32 values the step computes (not the caller's inputs or outputs), that
 * backward reads, that fit one binding (the cast and the unpack bind them whole), and whose gap holds
 * at least one other op (the last layer's output, read again just after the loss head, is not).
 */
export function chooseSpills(gpu: Gpu, storages: Iterable<Storage>, time: Timeline): Map<Storage, Spill> {
  const spills = new Map<Storage, Spill>();
  const whole = time.whole();
  for (const s of storages) {
    if (s.base.kind !== 'value' || s.base.dtype !== 'f32' || !s.life || s.life.from <= whole.from) continue;
    if (s.firstBackward === Infinity || s.firstBackward - s.lastForward <= 2) continue;
    if (s.words * 4 > gpu.maxBindingBytes) continue;
    spills.set(s, { storage: s, stowAt: s.lastForward, restoreAt: s.firstBackward, half: null });
  }
  return spills;
}

/** The f32 value's spans (before the stow, from the restore on) and its f16 copy's. */
export function spillSpans(spill: Spill): { value: Life[]; half: Life } {
  const life = spill.storage.life!;
  return {
    value: [
      { from: life.from, to: spill.stowAt },
      { from: spill.restoreAt, to: life.to },
    ],
    half: { from: spill.stowAt, to: spill.restoreAt },
  };
}

/** The f16 copy's size in words. */
export const spillWords = (spill: Spill): number => halfWords(spill.storage.words);

/**
 * The steps that move spilled values: each cast appended to the forward of the node at its stow
 * moment, each unpack put before the backward of the node at its restore moment (by node index).
 */
export function planSpills(
  gpu: Gpu,
  spills: Iterable<Spill>,
  time: Timeline,
  flag: GPUBuffer | undefined,
): { afterForward: Map<number, Step[]>; beforeBackward: Map<number, Step[]> } {
  const afterForward = new Map<number, Step[]>();
  const beforeBackward = new Map<number, Step[]>();
  const add = (map: Map<number, Step[]>, node: number, step: Step) => map.set(node, [...(map.get(node) ?? []), step]);
  for (const spill of spills) {
    const { value, words } = spill.storage;
    add(afterForward, spill.stowAt, planCastF16(gpu, value!, spill.half!, words, flag!));
    add(beforeBackward, time.nodeAtBackward(spill.restoreAt), planUnpackF16(gpu, spill.half!, value!, words));
  }
  return { afterForward, beforeBackward };
}
