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

export const zeros: ParamInit = (out) => out.fill(0);

export function uniformInit(limit: number): ParamInit {
  return (out, rand) => {
    for (let i = 0; i < out.length; i++) out[i] = (2 * rand.uniform() - 1) * limit;
  };
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
