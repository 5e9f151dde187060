/**
 * A model's first weights, drawn from its seed: every parameter's init, in layout order, from the
 * same two seeded streams (uniform, and normal from `seed ^ 0x9e3779b9`).
 *
 * `drawInitialWeights` does it in one go, as a model's constructor does. `drawInitialWeightsInPieces`
 * gives the same numbers bit for bit but lets the event loop turn about every 100 ms of drawing:
 * GPT-2 124M draws its weights on the CPU for 10-40 s, and a worker that answers nothing for that
 * long is dropped by its server. A parameter whose init is streamed (nn/init.ts, `streamed`) is
 * drawn a piece at a time; any other is drawn whole (the built-in ones that are not are small).
 */
import { isStreamed } from '../nn/init.ts';
import { seededNormal, seededUniform } from '../nn/random.ts';
import type { Parameter } from '../nn/tensor.ts';
import type { ParamEntry } from './model.ts';

/** Values a streamed parameter draws between two looks at the clock. */
const PIECE_VALUES = 1 << 16;
/** Drawing time between two turns of the event loop (drawInitialWeightsInPieces' default). */
export const TURN_EVERY_MS = 100;

export function drawInitialWeights(
  parameters: readonly Parameter[],
  layout: readonly ParamEntry[],
  flatLength: number,
  seed: number,
): Float32Array {
  const out = new Float32Array(flatLength);
  for (const _ of pieces(parameters, layout, out, seed));
  return out;
}

export async function drawInitialWeightsInPieces(
  parameters: readonly Parameter[],
  layout: readonly ParamEntry[],
  flatLength: number,
  seed: number,
  turnEveryMs = TURN_EVERY_MS,
): Promise<Float32Array> {
  const out = new Float32Array(flatLength);
  let since = performance.now();
  for (const _ of pieces(parameters, layout, out, seed)) {
    if (performance.now() - since < turnEveryMs) continue;
    await new Promise((resolve) => setTimeout(resolve, 0));
    since = performance.now();
  }
  return out;
}

/** Draws into `out` one piece per step: a whole parameter, or PIECE_VALUES of a streamed one, in order. */
function* pieces(
  parameters: readonly Parameter[],
  layout: readonly ParamEntry[],
  out: Float32Array,
  seed: number,
): Generator<void> {
  const rand = { uniform: seededUniform(seed), normal: seededNormal(seed ^ 0x9e3779b9) };
  for (let i = 0; i < parameters.length; i++) {
    const { offset, length } = layout[i];
    const init = parameters[i].init;
    const step = isStreamed(init) ? PIECE_VALUES : length;
    for (let at = 0; at < length; at += step) {
      init(out.subarray(offset + at, offset + Math.min(length, at + step)), rand);
      yield;
    }
  }
}
