/**
 * The folder of the ringtrain package: the repository when its .ts sources
 * run (src/core/… is two levels down), an install when the built JavaScript
 * runs (dist/src/core/… is three). Files that ship beside the code (shaders/,
 * the built page demo/dist, package.json) are found from here, the same way
 * in both, under Node and Deno.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCode, RingtrainError } from './errors.ts';

const PACKAGE_NAME = 'ringtrain';

function readManifest(dir: string): { name?: unknown; version?: unknown } | null {
  try {
    return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  } catch {
    return null;
  }
}

/** The nearest folder above this file whose package.json names ringtrain. */
function findPackageRoot(): string {
  const start = dirname(fileURLToPath(import.meta.url));
  for (let dir = start; ; dir = dirname(dir)) {
    if (readManifest(dir)?.name === PACKAGE_NAME) return dir;
    if (dirname(dir) === dir) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `ringtrain: no package.json named "${PACKAGE_NAME}" above ${start}; the package is incomplete, reinstall it (npm install ringtrain)`,
      );
    }
  }
}

export const PACKAGE_ROOT = findPackageRoot();

/** Whether the repository's .ts sources run here; an install runs the JavaScript built into dist/. */
export const RUNS_SOURCES = import.meta.url.endsWith('.ts');

/** What to do where the built page is missing: build it in the repository; an install shipped it, so reinstall. */
export const PAGE_MISSING_HINT = RUNS_SOURCES
  ? 'run npm run build:page'
  : 'reinstall ringtrain (npm install ringtrain), whose package holds the built page';

/** A path inside the package: `packagePath('shaders')`. */
export function packagePath(...parts: string[]): string {
  return join(PACKAGE_ROOT, ...parts);
}

/** The version in the package's package.json (what `ringtrain --version` prints). */
export function packageVersion(): string {
  const version = readManifest(PACKAGE_ROOT)?.version;
  return typeof version === 'string' ? version : 'unknown';
}
