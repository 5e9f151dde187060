/**
 * Each optimizer whose test file gives `WORDS_RUN` trains the words workload (the character-level
 * transformer on CMUdict words, `ringtrain train --model transformer`) through the CLI, as a user
 * runs it: a short run whose printed losses go down. Run it inside scripts/in-netns.sh, as every CLI test.
 */
import { describe, expect, it } from 'vitest';
import { ringtrain } from '../support/cli.ts';
import { OPTIMIZER_CASE_FILES } from './optimizer-cases.ts';

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
