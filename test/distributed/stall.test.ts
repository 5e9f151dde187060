import { describe, expect, it } from 'vitest';
import { QUIET_LINK } from '../../src/comm/communicator.ts';
import { describeStall, stallReporter } from '../../src/distributed/observe/stall.ts';

describe('stall lines', () => {
  it('name the ranks waited on, and say what kind of wait it is', () => {
    expect(describeStall({ rank: 0, name: 'grads', waitingFor: [2, 3], waitedMs: 4200 })).toBe(
      "stall: rank 0 has waited 4.2 s for ranks 2, 3 to submit 'grads' (slower than the others, stuck, or running different code)",
    );
    expect(describeStall({ rank: 1, name: QUIET_LINK, waitingFor: [2], waitedMs: 2600 })).toMatch(
      /^stall: rank 1 has heard nothing from rank 2 for 2\.6 s/,
    );
  });

  it('are said once per period for the same ranks, however many ranks notice', () => {
    let t = 0;
    const lines: string[] = [];
    const report = stallReporter(
      (l) => lines.push(l),
      10_000,
      () => t,
    );
    report({ rank: 0, name: QUIET_LINK, waitingFor: [2], waitedMs: 2500 });
    report({ rank: 1, name: QUIET_LINK, waitingFor: [2], waitedMs: 2500 });
    report({ rank: 0, name: 'grads', waitingFor: [2], waitedMs: 3000 });
    report({ rank: 0, name: QUIET_LINK, waitingFor: [3], waitedMs: 2500 });
    expect(lines).toHaveLength(3);
    t = 10_000;
    report({ rank: 1, name: QUIET_LINK, waitingFor: [2], waitedMs: 2500 });
    expect(lines).toHaveLength(4);
    expect(lines[3]).toContain('rank 1 has heard nothing from rank 2');
  });
});
