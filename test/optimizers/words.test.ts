/**
 * Each optimizer whose test file gives `WORDS_RUN` trains the words workload (the character-level
 * transformer on CMUdict words, `ringtrain train --model transformer`) through the CLI, as a user
 * runs it: a short run whose printed losses go down.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { OPTIMIZER_CASE_FILES } from './optimizer-cases.ts';

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function ringtrain(args: string[]): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/ringtrain.js', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The losses of the progress lines (`step 4/20, loss 3.4456, …`), in order. */
const printedLosses = (stderr: string): number[] =>
  [...stderr.matchAll(/^step \d+\/\d+, loss ([\d.]+)/gm)].map((m) => Number(m[1]));

describe('the words workload trains with each optimizer that says how', () => {
  const runs = Object.entries(OPTIMIZER_CASE_FILES).filter(([, f]) => f.WORDS_RUN);
  it.skipIf(runs.length === 0)('has optimizers to run', () => expect(runs.length).toBeGreaterThan(0));

  for (const [name, file] of runs) {
    it(`train --model transformer --optimizer ${name} ${file.WORDS_RUN!.join(' ')}: the loss goes down`, async () => {
      const args = ['train', '--model', 'transformer', '--optimizer', name, '--steps', '20', '--batch', '64'];
      const ran = await ringtrain([...args, '--eval-limit', '32', '--json', ...file.WORDS_RUN!]);
      expect(ran.code, ran.stderr.slice(-2000)).toBe(0);
      expect(JSON.parse(ran.stdout.trim().split('\n').pop()!)).toMatchObject({ optimizer: name, steps: 20 });
      const losses = printedLosses(ran.stderr);
      expect(losses.length, ran.stderr.slice(-2000)).toBeGreaterThanOrEqual(2);
      expect(losses.at(-1)!, `losses ${losses.join(', ')}`).toBeLessThan(losses[0]);
    }, 600_000);
  }
});
