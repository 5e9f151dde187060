/**
 * The page (demo/, with its vite.config.ts) built once for every test that serves it, instead of once per test
 * file: a build takes seconds of CPU and a dozen files serve the page. A build is kept in the system's temporary
 * folder under the SHA-256 of everything it is built from (the page, the library's sources and shaders, the
 * examples it imports, and the package files that pin Vite and the dependencies), so an edit to any of them builds
 * anew. The folder is shared: a test serves it and never writes into it.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DEMO = join(ROOT, 'demo');
/** What a build reads: these folders (the page imports src/, shaders/ and examples/), and these files. */
const INPUT_FOLDERS = ['demo', 'src', 'shaders', 'examples'];
const INPUT_FILES = ['package.json', 'package-lock.json', 'tsconfig.json'];
/** Not inputs: a build's own output, wherever `npm run build:page` left it. */
const NOT_INPUTS = new Set(['demo/dist', 'node_modules']);
const PREFIX = 'ringtrain-page-';
/** Builds unused for this long are removed when a new one is made (a run that still serves one touched it). */
const UNUSED_FOR_MS = 2 * 60 * 60 * 1000;

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (NOT_INPUTS.has(relative(ROOT, path))) return [];
    return entry.isDirectory() ? filesUnder(path) : entry.isFile() ? [path] : [];
  });
}

/** SHA-256 over every input's path and content. */
export function pageInputsHash(): string {
  const hash = createHash('sha256');
  const files = INPUT_FOLDERS.flatMap((f) => filesUnder(join(ROOT, f))).concat(INPUT_FILES.map((f) => join(ROOT, f)));
  for (const file of files.sort()) {
    hash.update(`${relative(ROOT, file)}\0`);
    hash.update(readFileSync(file));
    hash.update('\0');
  }
  return hash.digest('hex');
}

function removeUnusedBuilds(keep: string): void {
  for (const name of readdirSync(tmpdir())) {
    const path = join(tmpdir(), name);
    if (!/^ringtrain-page-[0-9a-f]{16}$/.test(name) || path === keep) continue;
    // Another process may remove it first.
    const mtime = statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? Date.now();
    if (Date.now() - mtime > UNUSED_FOR_MS) rmSync(path, { recursive: true, force: true });
  }
}

/**
 * The folder of the page built from the sources as they are now. The first caller builds it into a folder of its
 * own and renames that into place, so a test in another process never sees half a build; a second builder that
 * loses the race discards its copy.
 */
export async function builtPage(): Promise<string> {
  const dir = join(tmpdir(), `${PREFIX}${pageInputsHash().slice(0, 16)}`);
  if (existsSync(dir)) {
    const now = new Date();
    utimesSync(dir, now, now);
    return dir;
  }
  const building = mkdtempSync(join(tmpdir(), `${PREFIX}build-`));
  await build({
    configFile: join(DEMO, 'vite.config.ts'),
    root: DEMO,
    logLevel: 'error',
    build: { outDir: building, emptyOutDir: true },
  });
  try {
    renameSync(building, dir);
  } catch (err) {
    if (!existsSync(dir)) throw err;
    rmSync(building, { recursive: true, force: true });
  }
  removeUnusedBuilds(dir);
  return dir;
}
