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
import { detectRuntime } from '../core/runtime.ts';
import { type ModelFactory, registerModel } from './define.ts';
import { fnv1aHex } from '../core/hash.ts';

export { isModelFile } from './define.ts';

/**
 * Deno imports TypeScript itself. Under Node, tsx would treat a .ts file in a
 * folder without a `"type": "module"` package.json (a temporary directory, a
 * user's project) as CommonJS; tsImport loads it as the ES module it is.
 */
async function importModule(abs: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(abs).href;
  if (detectRuntime() === 'node' && /\.m?ts$/.test(abs)) {
    const { tsImport } = await import('tsx/esm/api');
    return (await tsImport(url, import.meta.url)) as Record<string, unknown>;
  }
  return (await import(url)) as Record<string, unknown>;
}

/** The name a model file goes by (`<base name>@<hash of its bytes>`), read without running it. */
export async function modelFileName(path: string): Promise<string> {
  const abs = resolve(path);
  let bytes: Uint8Array;
  try {
    bytes = await readFile(abs);
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `cannot read model file ${path} (${(err as Error).message}); pass a path to a .ts or .js file that exports a model factory`,
      { path },
      { cause: err },
    );
  }
  return `${basename(abs).replace(/\.(m?[jt]s)$/, '')}@${fnv1aHex(bytes)}`;
}

function noFactory(path: string, detail: Record<string, unknown>, more = ''): RingtrainError {
  const add =
    'add `export default function model(nn, options) { return { module, inputShape, classes }; }` (or a named export `model`)';
  return new RingtrainError(
    ErrorCode.InvalidArgument,
    `model file ${path} exports no model factory: ${add}; see the README's "Bring your own model".${more}`,
    detail,
  );
}

/** An export of a factory as ES modules or CommonJS write it: `export default`, `export const model`, `export { net as model }`, `module.exports`. */
const FACTORY_EXPORT =
  /export\s+default\b|export\s+(const|let|var|function|async\s+function)\s+model\b|export\s*\{[^}]*\b(model|default)\b[^}]*\}|module\.exports|exports\.(default|model)\b/;

/**
 * Importing a file runs it. A training script that exports no model (its model
 * is a class inside it) would train again when `predict --model` imports it,
 * so a file whose text shows no export of a factory is refused unread.
 */
async function refuseWithoutExport(path: string, abs: string): Promise<void> {
  const text = await readFile(abs, 'utf8');
  if (FACTORY_EXPORT.test(text)) return;
  throw noFactory(
    path,
    { path },
    ' It was not run: a training script that keeps its model inside builds it with createModel(gpu, factory) from such an export, and trains only when it is the program (README, "Use it as a library").',
  );
}

/**
 * Imports (runs) a model file and registers its factory. `expectName`: refuse, before
 * running anything, a file whose name and bytes are not the ones a job records.
 */
export async function loadModelFile(
  path: string,
  expectName?: (name: string) => void,
): Promise<{ name: string; factory: ModelFactory }> {
  const abs = resolve(path);
  const name = await modelFileName(path);
  expectName?.(name);
  await refuseWithoutExport(path, abs);
  let mod: Record<string, unknown>;
  try {
    mod = await importModule(abs);
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `model file ${path} failed to load: ${(err as Error).message}`,
      { path },
      { cause: err },
    );
  }
  let factory = mod.default ?? mod.model;
  // A file compiled as CommonJS arrives wrapped once more (default = its exports).
  if (factory && typeof factory === 'object')
    factory = (factory as Record<string, unknown>).default ?? (factory as Record<string, unknown>).model;
  if (typeof factory !== 'function') {
    throw noFactory(path, { path, exports: Object.keys(mod) });
  }
  registerModel(name, factory as ModelFactory);
  return { name, factory: factory as ModelFactory };
}
