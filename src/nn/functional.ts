/**
 * The ops as functions on symbolic tensors, for `forward` methods:
 *   const h = nn.F.relu(nn.F.linear(x, this.weight, this.bias));
 * Parameters may be passed where a tensor is expected.
 *
 * Not a hand list: `F` is every functional form the op folders export (a
 * lower-case function that returns a Tensor, beside the folder's `…Op` and
 * its layers), so an op's folder is the one place that names it.
 */
import * as ops from './ops/index.ts';
import type { Tensor } from './tensor.ts';

type OpExports = typeof ops;

/** The exports of the op folders that are functional forms: functions returning a Tensor (layers are classes, ops are objects). */
export type Functional = {
  [K in keyof OpExports as OpExports[K] extends (...args: never[]) => Tensor ? K : never]: OpExports[K];
};

/** Lower-case functions are the functional forms (a folder exports no other functions; test/nn/coverage.test.ts checks it). */
function isFunctionalForm(name: string, value: unknown): boolean {
  return typeof value === 'function' && /^[a-z]/.test(name);
}

export const F: Functional = Object.freeze(
  Object.fromEntries(Object.entries(ops).filter(([k, v]) => isFunctionalForm(k, v))),
) as Functional;
