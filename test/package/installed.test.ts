/**
 * The package as a user gets it (issue 35, "Done when"). The repository is
 * packed (`npm pack`, whose prepack builds dist/ and the page) from a copy of
 * it, so the repository's own dist/ and demo/dist are never touched while
 * other tests use them. The tarball goes into a fresh project with only
 * TypeScript beside it, and the user's script there (user-train.ts: an MLP on
 * two spirals with AdamW, DistributedOptimizer and broadcastParameters):
 * - type-checks and compiles with `tsc --init`'s settings (strict, nodenext);
 * - runs under Node alone (`node train.js`: a job of one), under Deno alone
 *   (`deno run -A`, the script importing `npm:ringtrain`), and under `ringtrain launch -np 2`
 *   (Node, and Deno running train.ts as it is), where both ranks end with the same weights,
 *   those of one process at twice the batch;
 * - `npx ringtrain train --model mlp --steps 20` runs with no flags on this
 *   machine without a GPU: under Node where Deno is not installed, under Deno
 *   where it is, saying which and why;
 * - `launch --tabs 1` from a second fresh project, a TF.js one (the user's project's install of the
 *   tarball copied in without TypeScript, TF.js and the README's TF.js example beside it, as a user
 *   would), serves the page shipped in the package to a Chromium tab that joins and trains beside the
 *   launched worker: both end with the same model.
 * Runs inside the private network namespace. On this 2-core machine: 225 s with the runs one after
 * the other and the machine quiet; 312-391 s with them concurrent (as now) while other test runs
 * held its load average near 20. The processes used 80 s of CPU in all; packing and installing
 * take about 100 s of the wall time. With the TF.js project and the tab's training: 375 s from a
 * fresh clone at a load average near 22 (the tab's test 68 s of it), 75 s of CPU.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forEachLine } from '../../src/core/lines.node.ts';
import { launchChromium } from '../support/chromium.ts';
import { requireNetns } from '../support/workers.ts';
import { openTab, waitForTrainingEnd } from '../page/serve-page.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'ringtrain-package-'));
const project = join(work, 'user-project');
const pageProject = join(work, 'page-project');
const tfjsProject = join(work, 'tfjs-project');
const USER_SCRIPT = readFileSync(join(REPO, 'test', 'package', 'user-train.ts'), 'utf8');
const DENO = join(REPO, 'node_modules', '.bin', 'deno');
const version = (dir: string): string =>
  (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;

/** TF.js for the example a tab trains beside a worker: ringtrain's optional peer dependencies and a backend. */
const TFJS_PACKAGES = ['@tensorflow/tfjs-core', '@tensorflow/tfjs-layers', '@tensorflow/tfjs-backend-cpu'];
/** The README's TF.js example, the two files a user copies (they import only ringtrain and ringtrain/tfjs). */
const TFJS_EXAMPLE = ['tfjs-mnist.ts', 'tfjs-mnist-train.ts'];
/** A few steps of the example's small network: 128 digits over 2 ranks (the worker and the tab) at 16 each. */
const TAB_BATCH = 16;
const TAB_TRAIN_EXAMPLES = 128;
const TAB_STEPS = TAB_TRAIN_EXAMPLES / 2 / TAB_BATCH;
const TAB_ARGS = [
  '--model',
  'small',
  '--optimizer',
  'momentum',
  '--epochs',
  '1',
  '--batch',
  String(TAB_BATCH),
  '--lr',
  '0.05',
  '--train-examples',
  String(TAB_TRAIN_EXAMPLES),
  '--test-examples',
  '64',
];
/** What a tab's Join panel says when its TF.js training is done. */
const TAB_FINISHED = /^Training finished: (\d+) steps, test accuracy ([\d.]+)% \(TF\.js, cpu backend\)\.$/;

/** What is not copied to pack from: installed and built things, and git's own. */
const NOT_PACKED_FROM = new Set(['node_modules', '.git', 'dist', 'demo/dist', 'test-results', '.tmp']);

/**
 * The environment of a user's processes: without the repository's source condition (which the
 * test runner sets so that the repository runs its .ts sources) and without Deno on PATH,
 * as in a project that never installed it.
 */
function userEnvironment(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  env.NODE_OPTIONS = (env.NODE_OPTIONS ?? '')
    .split(/\s+/)
    .filter((o) => !o.startsWith('--conditions=ringtrain-source'))
    .join(' ');
  delete env.DENO_CONDITIONS;
  env.PATH = (env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => dir !== '' && !existsSync(join(dir, 'deno')))
    .join(delimiter);
  return env;
}

/** A user's environment where Deno was installed: on PATH, where the CLI looks for it. */
function denoOnPath(): NodeJS.ProcessEnv {
  const env = userEnvironment();
  return { ...env, PATH: `${dirname(DENO)}${delimiter}${env.PATH}` };
}

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = userEnvironment()): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs and expects exit 0, naming the command and its output when it is not. */
async function ok(cmd: string, args: string[], cwd: string, env?: NodeJS.ProcessEnv): Promise<Ran> {
  const r = await run(cmd, args, cwd, env);
  expect(r.code, `${cmd} ${args.join(' ')}\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`).toBe(0);
  return r;
}

interface TrainResult {
  rank: number;
  size: number;
  steps: number;
  loss: number;
  weights: number[];
}

/** The user's script's JSON lines (after any `[rank N] ` prefix of the launcher). */
function results(stdout: string): TrainResult[] {
  return stdout
    .split('\n')
    .map((l) => l.slice(l.indexOf('{')))
    .filter((l) => l.startsWith('{"rank"'))
    .map((l) => JSON.parse(l) as TrainResult);
}

/** Largest |a − b| relative to the largest |b|. */
function relativeDifference(a: number[], b: number[]): number {
  expect(a.length).toBe(b.length);
  const scale = Math.max(...b.map(Math.abs));
  return Math.max(...a.map((v, i) => Math.abs(v - b[i]))) / scale;
}

/**
 * A page's script, type-checked as a bundler project (Vite) would: it gets the browser's entry,
 * whose init() takes the page's address, and none of Node's file pieces.
 */
const PAGE_SCRIPT = `import { acquireGpu, init } from 'ringtrain';
const session = await init({ server: 'https://example.test', job: 'j', token: 't' });
await acquireGpu();
// @ts-expect-error Node's init() takes no argument; the browser's needs the server, job and token
await init();
// @ts-expect-error loadCheckpoint reads files: Node and Deno only
import { loadCheckpoint } from 'ringtrain';
void session;
`;

/** A new project (an ES module package) in `dir` with `packages` installed from npm's cache. */
async function installInto(dir: string, name: string, packages: string[]): Promise<void> {
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, private: true, type: 'module' }));
  await ok('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', ...packages], dir);
}

/** What npm added to the user's project for TypeScript (and its record of the tree), beside ringtrain's install. */
const TYPESCRIPT_INSTALL = new Set(['typescript', '@typescript', '.bin/tsc', '.bin/tsserver', '.package-lock.json']);

/**
 * A new project in `dir` with the user's project's install of the tarball, less TypeScript: the same files npm
 * unpacked there, copied (a second `npm install` of the same tarball unpacked the same 350 MB again, about a
 * quarter of this file's time). Links are copied as they are, so `.bin/ringtrain` runs this project's copy.
 */
function copyInstall(from: string, dir: string, name: string): void {
  mkdirSync(dir);
  const manifest = JSON.parse(readFileSync(join(from, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  delete manifest.dependencies.typescript;
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ ...manifest, name }));
  const modules = join(from, 'node_modules');
  cpSync(modules, join(dir, 'node_modules'), {
    recursive: true,
    verbatimSymlinks: true,
    filter: (path) => !TYPESCRIPT_INSTALL.has(relative(modules, path)),
  });
}

/** Resolves with the page's link once the launcher prints it; rejects if the launcher ends first. */
function pageLink(launcher: ChildProcess, lines: string[]): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    forEachLine(launcher.stdout!, (line) => {
      lines.push(line);
      if (line.startsWith('[launch] page ')) resolve(line.slice('[launch] page '.length));
    });
    launcher.on('exit', (code) => reject(new Error(`launch ended (exit ${code}) before printing the page's link`)));
  });
}

beforeAll(async () => {
  requireNetns();
  const source = join(work, 'repository');
  cpSync(REPO, source, { recursive: true, filter: (path) => !NOT_PACKED_FROM.has(relative(REPO, path)) });
  symlinkSync(realpathSync(join(REPO, 'node_modules')), join(source, 'node_modules'));
  // npm runs prepack (scripts/build-package.mjs) in the copy, then packs what `files` names.
  await ok('npm', ['pack', '--pack-destination', work], source, { ...process.env });
  const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'));
  expect(tarball).toBe(`ringtrain-${version(REPO)}.tgz`);
  // Two fresh projects: the user's (only TypeScript beside ringtrain) and a TF.js one, with the same install of ringtrain.
  const typescript = `typescript@${version(join(REPO, 'node_modules', 'typescript'))}`;
  await installInto(project, 'user-project', [join(work, tarball!), typescript]);
  copyInstall(project, tfjsProject, 'tfjs-project');
  writeFileSync(join(project, 'train.ts'), USER_SCRIPT);
  // TF.js from the repository's node_modules: npm's cache holds its tarballs but not the registry's
  // index of them, and the namespace has no registry to ask. Linked, each resolves its own imports
  // (and the others') from there, so the script, ringtrain/tfjs and the backend share one tfjs-core.
  mkdirSync(join(tfjsProject, 'node_modules', '@tensorflow'));
  for (const name of TFJS_PACKAGES)
    symlinkSync(realpathSync(join(REPO, 'node_modules', name)), join(tfjsProject, 'node_modules', name));
  for (const file of TFJS_EXAMPLE) cpSync(join(REPO, 'examples', file), join(tfjsProject, file));
  // A page's code beside it, in a project of its own (a bundler's settings) with the same node_modules.
  mkdirSync(pageProject);
  symlinkSync(join(project, 'node_modules'), join(pageProject, 'node_modules'));
  writeFileSync(join(pageProject, 'main.ts'), PAGE_SCRIPT);
  writeFileSync(
    join(pageProject, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        module: 'esnext',
        moduleResolution: 'bundler',
        target: 'esnext',
        lib: ['esnext', 'dom'],
        types: [],
        strict: true,
        noEmit: true,
      },
    }),
  );
}, 400_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('npm install ringtrain, in a fresh project', () => {
  it('installs the built code, declarations, shaders and page, and nothing of the repository besides', () => {
    const installed = join(project, 'node_modules', 'ringtrain');
    for (const file of [
      'dist/src/index.node.js',
      'dist/src/index.node.d.ts',
      'dist/src/index.d.ts',
      'dist/src/tfjs/index.node.js',
      'dist/src/cli/main.js',
      'shaders/matmul.wgsl',
      'demo/dist/index.html',
      'bin/ringtrain.js',
    ]) {
      expect(existsSync(join(installed, file)), file).toBe(true);
    }
    expect(readdirSync(installed).sort()).toEqual([
      'README.md',
      'bin',
      'demo',
      'dist',
      'package.json',
      'scripts',
      'shaders',
    ]);
    expect(readdirSync(join(installed, 'demo'))).toEqual(['dist']);
    // The private network namespace `bench allreduce` runs its WebRTC peers in, and nothing else of scripts/.
    expect(readdirSync(join(installed, 'scripts'))).toEqual(['in-netns.sh']);
  });

  it(
    'type-checks and compiles the user script with tsc --init settings (strict, nodenext), with no error',
    { timeout: 120_000 },
    async () => {
      await ok('npx', ['tsc', '--init'], project);
      // One compile with the declarations checked too (tsc --init skips them): it reports all that the init
      // settings alone would and more, so a clean run proves both. The declarations the script reaches are
      // clean themselves: they name no type the project lacks.
      const tsc = await ok('npx', ['tsc', '--skipLibCheck', 'false'], project);
      expect(tsc.stdout + tsc.stderr).toBe('');
      expect(existsSync(join(project, 'train.js'))).toBe(true);
    },
  );

  it('gives a bundler project (a page) the types of the browser entry', { timeout: 120_000 }, async () => {
    const tsc = await ok(join(project, 'node_modules', '.bin', 'tsc'), ['-p', '.'], pageProject);
    expect(tsc.stdout + tsc.stderr).toBe('');
  });

  it('prints its version', async () => {
    const r = await ok('npx', ['ringtrain', '--version'], project);
    expect(r.stdout.trim()).toBe(version(REPO));
  });
});

// These start processes that wait on WebGPU's software adapters and on each other more than they
// use the CPU: together they take about as long as the longest alone.
describe.concurrent('the installed package runs', () => {
  it(
    'the script under Node alone and under Deno as one rank, and under launch -np 2 (Node, Deno) as one process at twice the batch',
    { timeout: 300_000 },
    async () => {
      // The same script as Deno users often write it, with an npm: specifier (resolved from node_modules
      // here); written after the type check, which cannot resolve npm: specifiers.
      writeFileSync(join(project, 'train-npm.ts'), USER_SCRIPT.replace("from 'ringtrain'", "from 'npm:ringtrain'"));
      // Deno with the bare specifier runs in the Deno launch below (its ranks run train.ts), so Deno alone runs
      // the npm: form only.
      const [alone, denoNpm, launched, launchedDeno] = await Promise.all([
        ok(process.execPath, ['train.js'], project),
        ok(DENO, ['run', '-A', 'train-npm.ts'], project),
        ok('npx', ['ringtrain', 'launch', '-np', '2', 'train.ts'], project),
        ok('npx', ['ringtrain', 'launch', '-np', '2', '--runtime', 'deno', 'train.ts'], project, denoOnPath()),
      ]);
      const [one] = results(alone.stdout);
      expect(one).toMatchObject({ rank: 0, size: 1, steps: 10 });
      expect(Number.isFinite(one.loss)).toBe(true);
      const [underDeno] = results(denoNpm.stdout);
      expect(underDeno).toMatchObject({ rank: 0, size: 1, steps: 10 });
      // Deno's adapter (lavapipe) and Node's (SwiftShader) round differently, a little.
      expect(relativeDifference(underDeno.weights, one.weights)).toBeLessThan(1e-4);
      for (const run of [launched, launchedDeno]) {
        const ranks = results(run.stdout).sort((a, b) => a.rank - b.rank);
        expect(ranks.map((r) => [r.rank, r.size])).toEqual([
          [0, 2],
          [1, 2],
        ]);
        expect(ranks[1].weights).toEqual(ranks[0].weights);
        expect(relativeDifference(ranks[0].weights, one.weights)).toBeLessThan(1e-4);
      }
    },
  );

  it(
    '`npx ringtrain train --model mlp --steps 20` with no flags, choosing Node where Deno is not installed, and Deno where it is',
    { timeout: 300_000 },
    async () => {
      const [withoutDeno, withDeno] = await Promise.all([
        ok('npx', ['ringtrain', 'train', '--model', 'mlp', '--steps', '20'], project),
        ok('npx', ['ringtrain', 'train', '--model', 'mlp', '--steps', '20'], project, denoOnPath()),
      ]);
      expect(withoutDeno.stdout.split('\n')[0]).toMatch(
        /^ringtrain: runtime node \(auto: Deno is not installed; npm install deno adds it/,
      );
      // With Deno there, the adapter decides: Deno on this machine's software adapters (Node on a real GPU).
      expect(withDeno.stdout.split('\n')[0]).toMatch(
        /^ringtrain: runtime (deno \(auto: no hardware GPU|node \(auto: hardware adapter)/,
      );
      for (const r of [withoutDeno, withDeno]) expect(r.stdout).toMatch(/^done: 20 steps, test accuracy [\d.]+%/m);
    },
  );

  it(
    '`npx ringtrain bench allreduce` over WebRTC, in a network namespace of its own made by the shipped script',
    { timeout: 300_000 },
    async () => {
      // Outside a namespace (as a user's shell is), the benchmark re-runs itself in one: nested in the test's here.
      // Deno as the user installed it (the package has no Deno of its own), for one of the two peers.
      const env = denoOnPath();
      delete env.RINGTRAIN_NETNS;
      const args = [
        'ringtrain',
        'bench',
        'allreduce',
        '--peers',
        '2',
        '--bytes',
        '1MiB',
        '--iterations',
        '2',
        '--runtimes',
        'node,deno',
      ];
      const r = await ok('npx', args, project, env);
      const result = JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, unknown>;
      expect(result).toMatchObject({ peers: 2, bytes: 1024 * 1024, transport: 'webrtc', runtimes: ['node', 'deno'] });
      expect(result.busbw_MBps).toBeGreaterThan(0);
    },
  );

  it(
    'launch --tabs 1 from a TF.js project: a tab opens the page shipped in the package and trains beside the worker',
    { timeout: 400_000 },
    async () => {
      // The command npx runs, started directly so that our SIGTERM reaches the launcher (which stops its worker).
      const bin = join(tfjsProject, 'node_modules', '.bin', 'ringtrain');
      const launcher = spawn(bin, ['launch', '-np', '1', '--tabs', '1', TFJS_EXAMPLE[0], ...TAB_ARGS], {
        cwd: tfjsProject,
        env: userEnvironment(),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const lines: string[] = [];
      let stderr = '';
      launcher.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const exited = new Promise<number | null>((resolve) => launcher.on('exit', resolve));
      const browser = await launchChromium();
      try {
        const { page, errors } = await openTab(browser, await pageLink(launcher, lines));
        // The page came from node_modules/ringtrain/demo/dist and found the job with the worker in it (rank 0).
        await page.waitForSelector('[data-testid=peer-count]:text("1")', { timeout: 120_000 });
        await page.waitForSelector('[data-testid=join]:not([disabled])', { timeout: 120_000 });
        await page.click('[data-testid=join]');
        const note = await waitForTrainingEnd(page, errors, 300_000).catch((err: Error) => {
          throw new Error(`${err.message}\n${lines.slice(-20).join('\n')}\n${stderr.slice(-3000)}`);
        });
        const finished = TAB_FINISHED.exec(note);
        expect(finished, note).not.toBeNull();
        // The tab took its share of the steps…
        expect(Number(finished![1])).toBe(TAB_STEPS);
        expect(await page.textContent('[data-testid=own-steps]')).toBe(String(TAB_STEPS));
        expect(await page.getAttribute('[data-testid=participate]', 'data-rank')).toBe('1');
        expect(await exited, `${lines.join('\n')}\n${stderr.slice(-3000)}`).toBe(0);
        // …in a ring of two with the worker, which ends with the same model: the same test accuracy.
        const summary = JSON.parse(lines.find((l) => l.startsWith('[rank 0] {'))!.slice('[rank 0] '.length)) as {
          size: number;
          steps: number;
          testAccuracy: number;
        };
        expect(summary).toMatchObject({ size: 2, steps: TAB_STEPS });
        expect(finished![2]).toBe((summary.testAccuracy * 100).toFixed(1));
        // The launcher ends with its worker and takes the page's server with it: the job panel's later polls are refused.
        expect(errors.filter((e) => !e.includes('net::ERR_CONNECTION_REFUSED'))).toEqual([]);
      } finally {
        await browser.close();
        if (launcher.exitCode === null && launcher.signalCode === null) launcher.kill('SIGTERM');
        await exited;
      }
    },
  );
});
