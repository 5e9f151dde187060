/**
 * `ringtrain run -np 3 --elastic` where one worker sends poisoned gradients
 * from step 3 on: the others name it, the server ejects it, the two survivors
 * finish every step. The ejected worker ends with a result of its own (stopped,
 * with a recovery file, and the rank it held before the ring re-formed); the
 * launcher must still report the job as done, name the ejection and its reason,
 * offer no file to resume from, and exit 0.
 * Real launcher (from the chaos entry, test/support/chaos: --chaos-worker), real
 * server, real Deno workers over real WebRTC.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killRuns, ringtrainIn } from '../support/cli.ts';
import { requireNetns } from '../support/workers.ts';

const STEPS = 20;
// From a temporary folder: the recovery files a run writes land there, not in the repository.
const CHAOS = 'test/support/chaos/bin.js';
const dir = mkdtempSync(join(tmpdir(), 'ringtrain-elastic-eject-'));
afterAll(() => {
  killRuns();
  rmSync(dir, { recursive: true, force: true });
});

describe('ringtrain run --elastic: a peer ejected mid-run', () => {
  it('the survivors finish every step; the launcher says done, names the ejection, and exits 0', async () => {
    requireNetns();
    const r = await ringtrainIn(
      dir,
      [
        'run',
        '-np',
        '3',
        '--elastic',
        '--runtime',
        'deno',
        '--model',
        'mlp',
        '--steps',
        String(STEPS),
        '--batch',
        '32',
        '--seed',
        '7',
        '--chaos-worker',
        '2:scale:1e30@step:3',
      ],
      CHAOS,
    );
    const said = `${r.stdout}\n${r.stderr}`;
    expect(r.code, said).toBe(0);
    expect(r.stdout, said).toMatch(
      new RegExp(
        `^done: ${STEPS} steps on 2 peers, test accuracy \\d+\\.\\d+%, \\d+ samples/s; 1 peer ejected \\(deno-2: ejected`,
        'm',
      ),
    );
    expect(said).not.toMatch(/^stopped:|resume with|not evaluated/m);
    expect(r.stderr).toMatch(/worker 2 left the run early \(exit \d+: ejected/);
  }, 400_000);
});
