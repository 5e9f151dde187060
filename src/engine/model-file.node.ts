/**
 * `--model ./my-model.ts`: loads a module file that exports a model factory
 * (src/engine/define.ts: `export default function (nn, options) { … }`, or a
 * named export `model`) and registers it. Its name is the file's base name
 * and a hash of its bytes (`my-model@1a2b3c4d`), so peers given different
 * files under the same name disagree on the name and are refused.
 * Node runs .ts files through tsx (as the CLI does), Deno natively.
 */
import { readFile } from 'node:fs/promises';
import { basename, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { type ModelFactory, registerModel } from './define.ts';

/** True when `--model` names a file rather than a built-in model. */
export function isModelFile(model: string): boolean {
  return /\.(m?[jt]s)$/.test(model) || model.includes('/') || model.includes('\\');
}

function fnv1a(bytes: Uint8Array): string {
  let h = 0x811c9dc5;
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193);
  return (h >>> 0).toString(16).padStart(8, '0');
}

export async function loadModelFile(path: string): Promise<{ name: string; factory: ModelFactory }> {
  const abs = resolve(path);
  let bytes: Uint8Array;
  try {
    bytes = await readFile(abs);
  } catch (err) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `cannot read model file ${path} (${(err as Error).message}); pass a path to a .ts or .js file that exports a model factory`, { path }, { cause: err });
  }
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(abs).href)) as Record<string, unknown>;
  } catch (err) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `model file ${path} failed to load: ${(err as Error).message}`, { path }, { cause: err });
  }
  const factory = mod.default ?? mod.model;
  if (typeof factory !== 'function') {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `model file ${path} exports no model factory: add \`export default function model(nn, options) { return { module, inputShape, classes }; }\` (or a named export \`model\`); see the README's "Bring your own model"`,
      { path, exports: Object.keys(mod) },
    );
  }
  const name = `${basename(abs).replace(/\.(m?[jt]s)$/, '')}@${fnv1a(bytes)}`;
  registerModel(name, factory as ModelFactory);
  return { name, factory: factory as ModelFactory };
}
