/**
 * Shared by the real-process ejection tests: a 3-peer elastic job on a real
 * server, real Deno workers over real WebRTC, one of them started with a
 * fault from the chaos entry (--chaos). Returns the workers for the test to judge.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer } from '../../server/index.ts';
import {
  CHAOS_ENTRY,
  killStartedWorkers,
  lastStep,
  seen,
  startDenoWorker,
  until,
  type TestWorker,
} from '../support/workers.ts';

const dirs: string[] = [];

/** For afterAll: kills what is left and removes the recovery folders. */
export function cleanUpRuns(): void {
  killStartedWorkers();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

export const STEPS = 30;
/** The step at which the faulty worker starts misbehaving (0-based, as the trainer counts). */
export const FAULT_STEP = 3;

export interface EjectionRun {
  honest: TestWorker[];
  faulty: TestWorker;
  honestCodes: (number | null)[];
  faultyCode: number | null;
  /** Where each worker's recovery checkpoint goes (--recovery), should its run end with an error. */
  recoveryDir: string;
}

/**
 * `heartbeatMs`: the server's, which sets how long a regroup waits for a membership change.
 * `hyperparameters`: added to the job's (`verify: true`, say).
 */
export async function runWithFault(
  id: string,
  fault: string,
  heartbeatMs?: number,
  elastic = true,
  hyperparameters: Record<string, number | boolean | string> = {},
): Promise<EjectionRun> {
  const run = await runWithFaults(id, [`${fault}@step:${FAULT_STEP}`], heartbeatMs, elastic, hyperparameters);
  return { ...run, faulty: run.faulty[0], faultyCode: run.faultyCodes[0] };
}

/**
 * Two honest workers and one faulty worker per spec (`--chaos` forms of test/support/chaos/faults.ts, with their @step),
 * all
 * in one elastic job, all started at once; a lone faulty worker is named faulty, several faulty-0, faulty-1...
 */
export async function runWithFaults(
  id: string,
  faults: string[],
  heartbeatMs?: number,
  elastic = true,
  hyperparameters: Record<string, number | boolean | string> = {},
) {
  const size = 2 + faults.length;
  const job = {
    id,
    token: `${id}-token`,
    config: {
      model: 'mlp',
      optimizer: 'sgd',
      hyperparameters: { lr: 0.05, momentum: 0.9, seed: 11, steps: STEPS, elastic, ...hyperparameters },
      batchPerPeer: 32,
      minPeers: 2,
      startPeers: size,
      maxPeers: size,
    },
  };
  const server = await startServer({ jobs: [job], staticDir: null, ...(heartbeatMs ? { heartbeatMs } : {}) });
  const recoveryDir = mkdtempSync(join(tmpdir(), `ringtrain-${id}-`));
  dirs.push(recoveryDir);
  const recovery = (name: string) => ['--name', name, '--recovery', join(recoveryDir, `${name}.safetensors`)];
  try {
    const honest = [0, 1].map((i) => startDenoWorker(server.url, job, recovery(`honest-${i}`)));
    const faulty = faults.map((f, i) =>
      startDenoWorker(
        server.url,
        job,
        [...recovery(faults.length > 1 ? `faulty-${i}` : 'faulty'), '--chaos', f],
        CHAOS_ENTRY,
      ),
    );
    const all = [...honest, ...faulty];
    await until(
      () => faulty.every((w) => w.rank !== undefined || w.result !== undefined),
      'the faulty workers to join',
      120_000,
      () => seen(all),
    );
    const codes: (number | null | undefined)[] = all.map(() => undefined);
    all.forEach((w, i) => void w.exit.then((c) => (codes[i] = c)));
    try {
      await until(() => codes.every((c) => c !== undefined), 'every worker to exit', 150_000);
    } catch (err) {
      // Say what each worker was doing, rather than only that time ran out.
      throw new Error(
        `${(err as Error).message}\n${all
          .map(
            (w, i) =>
              `--- ${faulty.includes(w) ? 'faulty' : 'honest'} (rank ${w.rank}), exit ${codes[i]}:\n${w.stderr
                .split('\n')
                .filter((l) => !l.includes('XDG_RUNTIME_DIR'))
                .join('\n')}`,
          )
          .join('\n')}`,
      );
    }
    return {
      honest,
      faulty,
      honestCodes: codes.slice(0, 2) as (number | null)[],
      faultyCodes: codes.slice(2) as (number | null)[],
      recoveryDir,
    };
  } finally {
    await server.close();
  }
}

/** The highest completed step a worker reported while the ring still had `size` peers. */
export function lastStepAtSize(w: TestWorker, size: number): number {
  return Math.max(0, ...w.steps.filter((s) => s.size === size).map((s) => s.step));
}

export { lastStep };
