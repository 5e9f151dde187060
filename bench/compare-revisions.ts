/**
 * Before/after matrix: do two revisions train to the same numbers? Checks out
 * each revision as a detached worktree under the temp folder, runs the same
 * `train` and `run -np 2` commands in both (mlp, cnn, transformer; Node and
 * Deno; a few steps, one seed, --save, --json), and compares every printed
 * loss and accuracy as text, digit for digit (the --json numbers and the
 * progress lines on stderr), and the checkpoints byte for byte (sha256).
 * Prints one JSON table on stdout, a line per case on stderr as it goes.
 *
 *   npx tsx bench/compare-revisions.ts --before 78a995d --after main
 *   npx tsx bench/compare-revisions.ts --before 78a995d --after HEAD --only train:cnn:deno --steps 5
 *
 * Exit status: 0 all the same, 1 some case differs, 125 a command failed or
 * printed no result (git bisect run's "skip"), so `git bisect run` can call it
 * with `--after HEAD --only <case>` on one differing case.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { args, opt } from './args.ts';

type Command = 'train' | 'run';
interface Case {
  command: Command;
  model: string;
  runtime: string;
}
interface Side {
  rev: string;
  sha: string;
  dir: string;
}
/** What one command printed that must match: loss/accuracy text by where it was printed, and the checkpoint's digest. */
interface Printed {
  numbers: Record<string, string>;
  checkpointSha256: string | null;
  seconds: number;
  error: string | null;
  tries: number;
}

/**
 * Flags renamed between revisions: the newer spelling, the older one, and the
 * first commit that takes the newer. A revision without that commit gets the
 * older spelling. Empty while 78a995d..main renamed none of the flags used here
 * (train/run --help compared: --model, --steps, --seed, --runtime, --json,
 * --save, --eval-limit, -np are spelt alike).
 */
const FLAG_RENAMES: readonly { flag: string; before: string; since: string }[] = [];

/** The parts of a line that carry a result (not its timing): "train loss 2.1790", "test accuracy 43.00%". */
const RESULT_TEXT =
  /\b((?:train|test|val|validation) )?(loss|accuracy|perplexity) (-?\d[\d.]*(?:e[-+]?\d+)?%?|NaN|-?Infinity)/g;
/** Where a progress line is: "step 3/5", "step 3/5 on 2 peers", "epoch 1: step 5". */
const LINE_PLACE = /^(?:(epoch \d+): )?step (\d+)/;
const COMMAND_TIMEOUT_MS = 20 * 60_000;
/**
 * A command that fails is run again, up to this many times in all: on the shared
 * 2-core machine a worker compiling its first step's pipelines was seen silent past
 * the server's heartbeat window (12 heartbeats of 5 s) and dropped. A result is never retried.
 */
const TRIES = Number(opt('tries', '2'));

const repo = git(process.cwd(), ['rev-parse', '--show-toplevel']);
const steps = opt('steps', '5');
const seed = opt('seed', '7');
const evalLimit = opt('eval-limit', '100');
const only = opt('only', '');
const keep = args.includes('--keep');

function git(cwd: string, gitArgs: string[]): string {
  const r = spawnSync('git', gitArgs, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${gitArgs.join(' ')} failed: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

function cases(): Case[] {
  const all: Case[] = [];
  for (const command of ['train', 'run'] as const)
    for (const model of ['mlp', 'cnn', 'transformer'])
      for (const runtime of ['node', 'deno']) all.push({ command, model, runtime });
  if (!only) return all;
  const wanted = only.split(',');
  const picked = all.filter((c) => wanted.includes(caseName(c)));
  if (picked.length !== wanted.length)
    throw new Error(`--only ${only}: cases are command:model:runtime, e.g. train:mlp:node or run:cnn:deno`);
  return picked;
}

function caseName(c: Case): string {
  return `${c.command}:${c.model}:${c.runtime}`;
}

/** A detached worktree of `rev` under `root`, with the repository's node_modules and its generated barrels. */
function checkout(rev: string, root: string): Side {
  const sha = git(repo, ['rev-parse', '--verify', `${rev}^{commit}`]);
  const dir = join(root, `rev-${sha.slice(0, 10)}`);
  if (!existsSync(dir)) {
    git(repo, ['worktree', 'add', '--detach', '--quiet', dir, sha]);
    symlinkSync(realpathSync(join(repo, 'node_modules')), join(dir, 'node_modules'));
    // Older revisions may predate the generated barrels; the script's absence means there is nothing to generate.
    if (existsSync(join(dir, 'scripts/gen-ops-index.mjs')))
      spawnSync(process.execPath, ['scripts/gen-ops-index.mjs'], { cwd: dir, stdio: 'ignore' });
  }
  return { rev, sha, dir };
}

function hasCommit(side: Side, commit: string): boolean {
  return spawnSync('git', ['merge-base', '--is-ancestor', commit, side.sha], { cwd: repo }).status === 0;
}

function commandLine(c: Case, side: Side, checkpoint: string): string[] {
  const words = [c.command, ...(c.command === 'run' ? ['-np', '2'] : []), '--model', c.model, '--runtime', c.runtime];
  words.push('--steps', steps, '--seed', seed, '--eval-limit', evalLimit, '--save', checkpoint, '--json');
  const renamed = FLAG_RENAMES.filter((r) => !hasCommit(side, r.since));
  const spelt = words.map((w) => renamed.find((r) => r.flag === w)?.before ?? w);
  // `run` links its workers over the network: inside a private namespace (the script nests safely).
  const launcher = c.command === 'run' ? ['sh', 'scripts/in-netns.sh', process.execPath] : [process.execPath];
  return [...launcher, 'bin/ringtrain.js', ...spelt];
}

/** Loss and accuracy texts: the JSON line's *_loss / *accuracy / *perplexity fields, and each progress line's. */
function printedNumbers(r: SpawnSyncReturns<string>): Record<string, string> | null {
  const jsonLine = r.stdout
    .trim()
    .split('\n')
    .reverse()
    .find((l) => l.startsWith('{'));
  if (!jsonLine) return null;
  const numbers: Record<string, string> = {};
  for (const [key, value] of Object.entries(JSON.parse(jsonLine) as Record<string, unknown>))
    if (/(loss|accuracy|perplexity)$/.test(key) && value !== null) numbers[`json ${key}`] = String(value);
  for (const line of r.stderr.split('\n')) {
    const place = LINE_PLACE.exec(line.trim());
    if (!place) continue;
    const where = place[1] ? `${place[1]} step ${place[2]}` : `step ${place[2]}`;
    for (const m of line.matchAll(RESULT_TEXT)) numbers[`${where}: ${m[1] ?? ''}${m[2]}`] = m[3];
  }
  return numbers;
}

function runOnce(c: Case, side: Side, root: string, tries: number): Printed {
  const checkpoint = join(root, `${caseName(c).replaceAll(':', '-')}-${side.sha.slice(0, 10)}.safetensors`);
  rmSync(checkpoint, { force: true });
  const [exe, ...argv] = commandLine(c, side, checkpoint);
  const t0 = performance.now();
  const r = spawnSync(exe, argv, { cwd: side.dir, encoding: 'utf8', maxBuffer: 1 << 26, timeout: COMMAND_TIMEOUT_MS });
  const seconds = Number(((performance.now() - t0) / 1000).toFixed(1));
  const numbers = r.status === 0 ? printedNumbers(r) : null;
  const checkpointSha256 = existsSync(checkpoint)
    ? createHash('sha256').update(readFileSync(checkpoint)).digest('hex')
    : null;
  const error =
    r.status !== 0
      ? `exit ${r.status ?? r.signal}: ${r.stderr.trim().split('\n').slice(-3).join(' | ')}`
      : !numbers
        ? 'no JSON line on stdout'
        : !checkpointSha256
          ? `no checkpoint at ${checkpoint}`
          : null;
  return { numbers: numbers ?? {}, checkpointSha256, seconds, error, tries };
}

function runCase(c: Case, side: Side, root: string): Printed {
  let printed = runOnce(c, side, root, 1);
  while (printed.error && printed.tries < TRIES) printed = runOnce(c, side, root, printed.tries + 1);
  return printed;
}

/** One row of the table: what differs between the two sides of a case (keys printed on one side only are listed, not failed). */
function compare(c: Case, before: Printed, after: Printed) {
  const keys = [...new Set([...Object.keys(before.numbers), ...Object.keys(after.numbers)])];
  const both = keys.filter((k) => k in before.numbers && k in after.numbers);
  const differing = both
    .filter((k) => before.numbers[k] !== after.numbers[k])
    .map((k) => ({ printed: k, before: before.numbers[k], after: after.numbers[k] }));
  const checkpointSame = before.checkpointSha256 === after.checkpointSha256;
  const errors = [before.error && `before: ${before.error}`, after.error && `after: ${after.error}`].filter(Boolean);
  return {
    case: caseName(c),
    same: errors.length === 0 && differing.length === 0 && checkpointSame,
    numbers_compared: both.length,
    losses: Object.fromEntries(both.filter((k) => /loss/.test(k)).map((k) => [k, after.numbers[k]])),
    differing,
    printed_only_before: keys.filter((k) => !(k in after.numbers)),
    printed_only_after: keys.filter((k) => !(k in before.numbers)),
    checkpoint_sha256: { before: before.checkpointSha256, after: after.checkpointSha256, same: checkpointSame },
    seconds: { before: before.seconds, after: after.seconds },
    tries: { before: before.tries, after: after.tries },
    errors,
  };
}

function main(): number {
  const picked = cases();
  const root = mkdtempSync(join(tmpdir(), 'ringtrain-compare-'));
  const sides: Side[] = [];
  try {
    sides.push(checkout(opt('before', '78a995d'), root), checkout(opt('after', 'HEAD'), root));
    const rows = picked.map((c) => {
      const row = compare(c, runCase(c, sides[0], root), runCase(c, sides[1], root));
      console.error(JSON.stringify({ case: row.case, same: row.same, differing: row.differing, errors: row.errors }));
      return row;
    });
    const [before, after] = sides.map(({ rev, sha }) => ({ rev, sha }));
    const same = rows.every((r) => r.same);
    console.log(JSON.stringify({ bench: 'compare-revisions', before, after, steps, seed, same, cases: rows }, null, 1));
    const differs = rows.some((r) => r.differing.length > 0 || (r.errors.length === 0 && !r.checkpoint_sha256.same));
    return differs ? 1 : same ? 0 : 125;
  } finally {
    if (!keep) {
      for (const s of new Set(sides.map((x) => x.dir))) git(repo, ['worktree', 'remove', '--force', s]);
      rmSync(root, { recursive: true, force: true });
    }
  }
}

process.exitCode = main();
