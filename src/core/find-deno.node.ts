/**
 * Where Deno's executable is, for anything that starts Deno processes (the CLI's
 * runtime choice, local rings of peers): looked up, never assumed to sit inside
 * this package, since an installed ringtrain has no node_modules of its own.
 */
import { existsSync } from 'node:fs';
import process from 'node:process';
import { delimiter, dirname, join, resolve as resolvePath } from 'node:path';
import { PACKAGE_ROOT } from './package-root.node.ts';

/** Each folder from `dir` up to the root. */
function foldersUp(dir: string): string[] {
  const out: string[] = [];
  for (let d = resolvePath(dir); ; d = dirname(d)) {
    out.push(d);
    if (dirname(d) === d) return out;
  }
}

/**
 * Deno's executable, or undefined when none is installed: the `deno` npm package's
 * (node_modules/.bin/deno beside the project being run, or beside this package), else
 * `deno` on PATH. Deno is a development dependency of ringtrain, so an install has it
 * only when the user's project added it.
 */
export function findDeno(): string | undefined {
  const bins = [...foldersUp(process.cwd()), ...foldersUp(PACKAGE_ROOT)].map((d) =>
    join(d, 'node_modules', '.bin', 'deno'),
  );
  const onPath = (process.env.PATH ?? '')
    .split(delimiter)
    .filter(Boolean)
    .map((d) => join(d, 'deno'));
  return [...bins, ...onPath].find((file) => existsSync(file));
}
