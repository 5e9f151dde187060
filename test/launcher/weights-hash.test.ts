/**
 * `run --json` carries each rank's `weights_hash` (the SHA-256 of its final
 * weights and optimizer state, agreed at the ring's last state check:
 * src/distributed/robust/state-agreement.ts), one value on every rank. Real workers
 * over real links, inside the private network namespace.
 */
import { describe, expect, it } from 'vitest';
import { ringtrain } from '../support/cli.ts';

describe('run --json', () => {
  it("carries every rank's weights_hash, one value", async () => {
    const r = await ringtrain(['run', '-np', '2', '--runtime', 'deno', '--steps', '3', '--eval-limit', '64', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
      weights_hash_by_rank: { rank: number; weights_hash: string }[];
    };
    expect(result.weights_hash_by_rank.map((w) => w.rank)).toEqual([0, 1]);
    expect(result.weights_hash_by_rank[0].weights_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(result.weights_hash_by_rank[1].weights_hash).toBe(result.weights_hash_by_rank[0].weights_hash);
  }, 240_000);
});
