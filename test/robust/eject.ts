/**
 * Shared by the real-process ejection tests: a 3-peer elastic job on a real
 * server, real Deno workers over real WebRTC, one of them started with a
 * test-only --fault. Returns the workers for the test to judge.
 */
import { startServer } from '../../server/index.ts';
import { lastStep, startDenoWorker, until, type TestWorker } from '../support/workers.ts';

export const STEPS = 30;
/** The step at which the faulty worker starts misbehaving (0-based, as the trainer counts). */
export const FAULT_STEP = 3;

export interface EjectionRun {
  honest: TestWorker[];
  faulty: TestWorker;
  honestCodes: (number | null)[];
  faultyCode: number | null;
}

/** `heartbeatMs`: the server's, which sets how long a regroup waits for a membership change. */
export async function runWithFault(id: string, fault: string, heartbeatMs?: number): Promise<EjectionRun> {
  const job = {
    id,
    token: `${id}-token`,
    config: { model: 'mlp', optimizer: 'sgd', hyperparameters: { lr: 0.05, momentum: 0.9, seed: 11, steps: STEPS, elastic: true }, batchPerPeer: 32, minPeers: 2, startPeers: 3, maxPeers: 3 },
  };
  const server = await startServer({ jobs: [job], staticDir: null, ...(heartbeatMs ? { heartbeatMs } : {}) });
  try {
    const honest = [0, 1].map((i) => startDenoWorker(server.url, job, ['--name', `honest-${i}`]));
    const faulty = startDenoWorker(server.url, job, ['--name', 'faulty', '--fault', `${fault}@step:${FAULT_STEP}`]);
    await until(() => faulty.rank !== undefined || faulty.result !== undefined, 'the faulty worker to join', 120_000);
    const all = [...honest, faulty];
    const codes: (number | null | undefined)[] = all.map(() => undefined);
    all.forEach((w, i) => void w.exit.then((c) => (codes[i] = c)));
    try {
      await until(() => codes.every((c) => c !== undefined), 'every worker to exit', 150_000);
    } catch (err) {
      // Say what each worker was doing, rather than only that time ran out.
      throw new Error(`${(err as Error).message}\n${all.map((w) => `--- ${w === faulty ? 'faulty' : 'honest'} (rank ${w.rank}), exit ${codes[all.indexOf(w)]}:\n${w.stderr.split('\n').filter((l) => !l.includes('XDG_RUNTIME_DIR')).join('\n')}`).join('\n')}`);
    }
    const honestCodes = codes.slice(0, 2) as (number | null)[];
    const faultyCode = codes[2] as number | null;
    return { honest, faulty, honestCodes, faultyCode };
  } finally {
    await server.close();
  }
}

/** The highest completed step a worker reported while the ring still had `size` peers. */
export function lastStepAtSize(w: TestWorker, size: number): number {
  return Math.max(0, ...w.steps.filter((s) => s.size === size).map((s) => s.step));
}

export { lastStep };
