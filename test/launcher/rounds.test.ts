/**
 * What a steady-state step costs in rounds, as a user's job runs it: `ringtrain
 * run -np 4` over real WebRTC. After the first step (which negotiates every
 * collective once, through the coordinator) each step runs its collectives on
 * the response cache: the gradient allreduce and the step checks' allgather
 * of norms and sketches (every step; docs/COLLECTIVES.md), with no negotiation
 * at all. `run --json` reports it per step and the timeline's 'rounds' counter
 * step by step.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ringtrain } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-rounds-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a steady-state step of a default 4-rank job negotiates nothing', () => {
  for (const runtime of ['node', 'deno'] as const) {
    it(`MLP, ${runtime} workers: one gradient collective and the step checks per step, no negotiation`, async () => {
      const timeline = join(dir, `${runtime}.json`);
      const r = await ringtrain(['run', '-np', '4', '--runtime', runtime, '--model', 'mlp', '--steps', '5', '--batch', '16', '--json', '--timeline', timeline]);
      expect(r.code, r.stderr).toBe(0);
      const result = JSON.parse(r.stdout.trim().split('\n').pop()!);
      expect(result).toMatchObject({ steps: 5, size: 4, runtime, ok: true });
      expect(result.negotiations_per_step).toBe(0);
      // The gradient allreduce is named after its tensors: 'gradients (4 tensors, layout #…)'.
      const names = Object.entries(result.collectives_by_name_per_step as Record<string, number>).map(([k, v]) => [k.replace(/ \(.*\)$/, ''), v]);
      expect(Object.fromEntries(names)).toEqual({ gradients: 1, 'gradient-sketches': 1 });
      expect(result.collectives_per_step).toBe(2);

      const trace = JSON.parse(readFileSync(timeline, 'utf8')) as { traceEvents: { name: string; ph: string; pid: number; args?: { collectives: number; negotiations: number } }[] };
      for (let rank = 0; rank < 4; rank++) {
        const counts = trace.traceEvents.filter((e) => e.ph === 'C' && e.name === 'rounds' && e.pid === rank).map((e) => e.args!);
        expect(counts.length, `rank ${rank}`).toBe(5);
        expect(counts[0].negotiations, `rank ${rank}'s first step negotiates`).toBeGreaterThan(0);
        for (const c of counts.slice(1)) expect(c).toEqual({ collectives: 2, negotiations: 0 });
        // Each step's gradient read-back is a span of its own, apart from the ring's phases.
        expect(trace.traceEvents.filter((e) => e.ph === 'X' && e.name === 'gpu-wait' && e.pid === rank).length, `rank ${rank}'s gpu-wait spans`).toBe(5);
      }
    }, 300_000);
  }
});
