/**
 * The Horovod conformance cases (horovod-cases.ts) over memory links, on
 * rings of 1 to 5 ranks (powers of two and not). The same cases run over
 * real WebRTC in test/comm/webrtc-ring.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { CASES } from './horovod-cases.ts';

describe('Horovod semantics over memory links', () => {
  for (const c of CASES) {
    it(c.name, async () => {
      for (const size of [1, 2, 3, 4, 5]) {
        const comms = createMemoryRing(size);
        const out = await Promise.allSettled(comms.map((comm) => c.run(comm)));
        await Promise.all(comms.map((comm) => comm.close()));
        out.forEach((s, rank) =>
          expect(s.status === 'rejected' ? `size ${size} rank ${rank}: ${(s.reason as Error).message}` : 'ok').toBe(
            'ok',
          ),
        );
      }
    });
  }
});
