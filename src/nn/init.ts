/**
 * Parameter initialisation shared by the layers: `'torch'` draws as PyTorch's
 * defaults do (uniform in ±1/√fan_in for weights and biases); `'he'` (normal,
 * std √(2/fan_in), for ReLU layers) and `'glorot'` (uniform in
 * ±√(6/(fan_in+fan_out))) with zero biases are the schemes of the built-in
 * MLP and CNN. He and Glorot draw a Linear weight in [in, out] order and store
 * it transposed, so the built-in models keep the initial weights they had when
 * weights were stored [in, out].
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { ParamInit } from './tensor.ts';

export type InitScheme = 'torch' | 'he' | 'glorot';

/**
 * Marks an init that draws its values one after another in storage order, each from the streams
 * alone: filling consecutive pieces of a tensor in order then gives the values of filling it whole,
 * so a big parameter can be drawn a piece at a time (engine/initial-weights.ts).
 */
export function streamed(init: ParamInit): ParamInit {
  return Object.assign(init, { [STREAMED]: true });
}

export function isStreamed(init: ParamInit): boolean {
  return (init as ParamInit & { [STREAMED]?: boolean })[STREAMED] === true;
}

const STREAMED = Symbol('streamed init');

export const zeros: ParamInit = streamed((out) => out.fill(0));

export function uniformInit(limit: number): ParamInit {
  return streamed((out, rand) => {
    for (let i = 0; i < out.length; i++) out[i] = (2 * rand.uniform() - 1) * limit;
  });
}

/** Fills [rows, cols] storage with values drawn in [cols, rows] order (transposed). */
export function transposed(draw: ParamInit, rows: number, cols: number): ParamInit {
  return (out, rand) => {
    const t = new Float32Array(out.length);
    draw(t, rand);
    for (let c = 0; c < cols; c++) for (let r = 0; r < rows; r++) out[r * cols + c] = t[c * rows + r];
  };
}

export function weightInit(scheme: InitScheme, fanIn: number, fanOut: number): ParamInit {
  if (scheme === 'torch') return uniformInit(1 / Math.sqrt(fanIn));
  if (scheme === 'glorot') return uniformInit(Math.sqrt(6 / (fanIn + fanOut)));
  const std = Math.sqrt(2 / fanIn);
  return (out, rand) => {
    for (let i = 0; i < out.length; i++) out[i] = rand.normal() * std;
  };
}

export function positive(layer: string, values: Record<string, number>): void {
  for (const [k, v] of Object.entries(values)) {
    if (!Number.isInteger(v) || v < 1)
      throw new RingtrainError(ErrorCode.InvalidArgument, `${layer}: ${k} must be a positive integer, got ${v}`, {
        [k]: v,
      });
  }
}
