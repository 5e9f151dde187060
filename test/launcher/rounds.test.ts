/**
 * What a steady-state step costs in rounds, as a user's job runs it: `ringtrain
 * run -np N` over real WebRTC, for the MLP, the CNN and the transformer, with
 * Node and with Deno workers. After the first step (which negotiates every
 * collective once, through the coordinator) each step runs its collectives on
 * the response cache: the gradient allreduce and, beside it, the step checks'
 * allgather of norms and sketches (every step; docs/COLLECTIVES.md), with no
 * negotiation at all, so the step waits for one round. The gradient goes in
 * buckets, each reduced as soon as backward finishes it (src/distributed/
 * reduce/overlap.ts): one collective per bucket, all of them one round. `run --json`
 * reports it per step and the timeline's 'rounds' counter step by step.
 *
 * The MLP runs 4 Deno workers (a default job's ring) and 2 Node workers; the CNN
 * and the transformer 2 Deno workers, each for a few small steps: their first step compiles every kernel on a
 * software adapter, which 4 workers on a 2-core machine would pay 4 times.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ringtrain } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-rounds-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Gradient buckets of 256 KiB (grad-buckets.ts): the MLP's last layer apart from its first, the
// CNN's 45 KB in one, the transformer's 413 KB in two (its last 8 blocks' tensors, then the rest).
// The rounds are the collectives layer's, the same code under either runtime: the MLP shows that under
// both, with 2 Node workers (4 of them, each compiling every kernel with SwiftShader, took 117 s at a load
// average near 22 and went silent past the server's heartbeat window; 4 Deno workers took 34 s). The CNN and
// the transformer compile many more kernels, so they run once each, under Deno (the transformer's first steps
// took 71 s with Node's SwiftShader, about 15 s with Deno's lavapipe).
const MODELS = [
  { model: 'mlp', np: 4, steps: 5, batch: 16, buckets: 2, runtimes: ['deno'] },
  { model: 'mlp', np: 2, steps: 5, batch: 16, buckets: 2, runtimes: ['node'] },
  { model: 'cnn', np: 2, steps: 3, batch: 4, buckets: 1, runtimes: ['deno'] },
  { model: 'transformer', np: 2, steps: 3, batch: 8, buckets: 2, runtimes: ['deno'] },
] as const;

describe('a steady-state step of a default job negotiates nothing and waits for one collective', () => {
  for (const { model, np, steps, batch, buckets, runtimes } of MODELS) {
    for (const runtime of runtimes) {
      it(`${model}, ${np} ${runtime} workers: the gradient allreduce with the step checks beside it, no negotiation`, async () => {
        const timeline = join(dir, `${model}-${runtime}.json`);
        const r = await ringtrain([
          'run',
          '-np',
          String(np),
          '--runtime',
          runtime,
          '--model',
          model,
          '--steps',
          String(steps),
          '--batch',
          String(batch),
          '--eval-limit',
          '64',
          '--json',
          '--timeline',
          timeline,
        ]);
        expect(r.code, r.stderr).toBe(0);
        const result = JSON.parse(r.stdout.trim().split('\n').pop()!);
        expect(result).toMatchObject({ steps, size: np, runtime, ok: true });
        expect(result.negotiations_per_step).toBe(0);
        // The gradient allreduce is named after its tensors: 'gradients (4 tensors, layout #…)', and 'bucket i/n' of
        // them.
        const names = Object.entries(result.collectives_by_name_per_step as Record<string, number>).map(([k, v]) => [
          k.replace(/ bucket \d+\/\d+$/, '').replace(/ \(.*\)$/, ''),
          v,
        ]);
        const byName: Record<string, number> = {};
        for (const [k, v] of names) byName[k] = (byName[k] ?? 0) + (v as number);
        expect(byName).toEqual({ gradients: buckets, 'gradient-sketches': 1 });
        expect(result.gradient_buckets_per_step).toBe(buckets);
        expect(result.collectives_per_step).toBe(buckets + 1);
        // The sketches travel beside the gradients, and the buckets beside one another: one round to wait for.
        expect(result.sequential_collectives_per_step).toBe(1);

        const trace = JSON.parse(readFileSync(timeline, 'utf8')) as {
          traceEvents: {
            name: string;
            ph: string;
            pid: number;
            args?: { collectives: number; negotiations: number; what?: string };
          }[];
        };
        for (let rank = 0; rank < np; rank++) {
          const counts = trace.traceEvents
            .filter((e) => e.ph === 'C' && e.name === 'rounds' && e.pid === rank)
            .map((e) => e.args!);
          expect(counts.length, `rank ${rank}`).toBe(steps);
          expect(counts[0].negotiations, `rank ${rank}'s first step negotiates`).toBeGreaterThan(0);
          for (const c of counts.slice(1))
            expect(c).toEqual({ collectives: buckets + 1, sequential: 1, negotiations: 0, buckets });
          // Each bucket's read-back is a span of its own, apart from the ring's phases (and the update's submit).
          expect(
            trace.traceEvents.filter(
              (e) => e.ph === 'X' && e.name === 'gpu-wait' && e.pid === rank && e.args?.what?.startsWith('gradients'),
            ).length,
            `rank ${rank}'s gpu-wait spans`,
          ).toBe(steps * buckets);
        }
      }, 300_000);
    }
  }
});

describe("an elastic job's default step (verify and the doubt rule on) negotiates nothing", () => {
  it('mlp, 3 deno workers: the sum with the sketches beside it, then the verdicts, all on the response cache', async () => {
    const r = await ringtrain([
      'run',
      '-np',
      '3',
      '--runtime',
      'deno',
      '--model',
      'mlp',
      '--elastic',
      '--steps',
      '5',
      '--batch',
      '16',
      '--eval-limit',
      '64',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(result).toMatchObject({ steps: 5, size: 3, ok: true });
    // The verified sum went ahead on its cached agreement (docs/COLLECTIVES.md, "Rounds per step"): it negotiated
    // at every step before.
    expect(result.negotiations_per_step).toBe(0);
    const byName = Object.fromEntries(
      Object.entries(result.collectives_by_name_per_step as Record<string, number>).map(([k, v]) => [
        k.replace(/ \(.*\)$/, ''),
        v,
      ]),
    );
    expect(byName).toEqual({
      gradients: byName.gradients,
      'gradient-sketches': 1,
      'verify-verdicts': 1,
      'membership-epoch': 1,
    });
    // Two rounds (issue 37): the sum with the doubt rule's sketches and the membership agreement beside it, then
    // the verdicts. A step whose verdict leaves a rank out is summed again, a round more (rare in an honest run).
    expect(byName.gradients).toBeGreaterThanOrEqual(1);
    expect(result.sequential_collectives_per_step).toBeCloseTo(1 + byName.gradients, 9);
  }, 300_000);
});
