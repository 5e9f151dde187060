/**
 * Turning a digit drawn on a canvas into what the model was trained on. MNIST
 * digits were scaled so that their longer side is 20 pixels and placed in a
 * 28×28 frame with their centre of mass in the middle; a drawing prepared the
 * same way is recognised far more reliably than a plain downscale.
 */

export const SIDE = 28;
const BOX = 20;
/** Ink below this (0..1) counts as paper when finding the digit's bounds. */
const INK = 0.1;

/** `ink` is width×height values in [0, 1] (1 = full ink). Returns 28×28 floats in [0, 1], or null for a blank drawing. */
export function toMnist(ink: ArrayLike<number>, width: number, height: number): Float32Array | null {
  let x0 = width;
  let y0 = height;
  let x1 = -1;
  let y1 = -1;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      if (ink[y * width + x] > INK) {
        if (x < x0) x0 = x;
        if (x > x1) x1 = x;
        if (y < y0) y0 = y;
        if (y > y1) y1 = y;
      }
    }
  }
  if (x1 < 0) return null;
  const w = x1 - x0 + 1;
  const h = y1 - y0 + 1;
  const scale = BOX / Math.max(w, h);
  const tw = Math.max(1, Math.round(w * scale));
  const th = Math.max(1, Math.round(h * scale));
  // Box-average the digit's bounds into tw×th.
  const small = new Float32Array(tw * th);
  for (let ty = 0; ty < th; ty++) {
    const sy0 = y0 + Math.floor((ty * h) / th);
    const sy1 = Math.max(sy0 + 1, y0 + Math.floor(((ty + 1) * h) / th));
    for (let tx = 0; tx < tw; tx++) {
      const sx0 = x0 + Math.floor((tx * w) / tw);
      const sx1 = Math.max(sx0 + 1, x0 + Math.floor(((tx + 1) * w) / tw));
      let sum = 0;
      for (let y = sy0; y < sy1; y++) for (let x = sx0; x < sx1; x++) sum += ink[y * width + x];
      small[ty * tw + tx] = sum / ((sy1 - sy0) * (sx1 - sx0));
    }
  }
  // Place it so its centre of mass lands on the frame's centre.
  let mass = 0;
  let cx = 0;
  let cy = 0;
  for (let y = 0; y < th; y++) {
    for (let x = 0; x < tw; x++) {
      const v = small[y * tw + x];
      mass += v;
      cx += v * x;
      cy += v * y;
    }
  }
  const ox = Math.round(SIDE / 2 - (mass > 0 ? cx / mass : tw / 2));
  const oy = Math.round(SIDE / 2 - (mass > 0 ? cy / mass : th / 2));
  const out = new Float32Array(SIDE * SIDE);
  for (let y = 0; y < th; y++) {
    for (let x = 0; x < tw; x++) {
      const X = x + ox;
      const Y = y + oy;
      if (X >= 0 && X < SIDE && Y >= 0 && Y < SIDE) out[Y * SIDE + X] = Math.min(1, small[y * tw + x]);
    }
  }
  return out;
}

/** Softmax of one row of logits, for showing how sure the model is. */
export function softmax(logits: ArrayLike<number>): number[] {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i]);
  const exps = Array.from({ length: logits.length }, (_, i) => Math.exp(logits[i] - max));
  const total = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / total);
}

export function argmax(values: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}
