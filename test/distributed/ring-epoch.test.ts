/**
 * Epochs by server connection (ring-epoch.ts): a later connection's epoch is
 * newer whatever its number, and the ranks' one-number agreement keeps that
 * order, so ranks that heard of epochs on different connections re-form at the
 * later connection's.
 */
import { describe, expect, it } from 'vitest';
import { allreduce } from '../../src/collectives/allreduce.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import {
  compareEpochs,
  epochAfter,
  epochFromAgreement,
  epochToAgreement,
  formatEpoch,
  newerEpoch,
  type RingEpoch,
} from '../../src/distributed/session/ring-epoch.ts';

const e = (generation: number, epoch: number): RingEpoch => ({ generation, epoch });

describe('RingEpoch', () => {
  it('orders by server connection first, then by epoch', () => {
    expect(compareEpochs(e(1, 2), e(0, 900))).toBeGreaterThan(0);
    expect(compareEpochs(e(0, 3), e(0, 4))).toBeLessThan(0);
    expect(compareEpochs(e(2, 5), e(2, 5))).toBe(0);
    expect(newerEpoch(e(0, 900), e(1, 2))).toEqual(e(1, 2));
    expect(epochAfter(e(1, 2))).toEqual(e(1, 3));
    expect(formatEpoch(e(0, 4))).toBe('epoch 4');
    expect(formatEpoch(e(1, 4))).toBe('epoch 4 of server connection 2');
  });

  it("the ranks' max-allreduce agreement picks the newest epoch across connections, and maps back to it", async () => {
    const heard = [e(0, 999_999), e(1, 2), e(0, 7)];
    const ring = createMemoryRing(heard.length);
    const agreed = await Promise.all(
      ring.map((comm, r) => allreduce(comm, new Int32Array([epochToAgreement(heard[r])]), { op: 'max' })),
    );
    for (const a of agreed) expect(epochFromAgreement(a[0])).toEqual(e(1, 2));
    for (const c of ring) await c.close();
  });

  it('refuses an epoch the agreement cannot carry, naming it', () => {
    expect(() => epochToAgreement(e(0, 1_000_000))).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidArgument, message: expect.stringMatching(/epoch 1000000/) }),
    );
    expect(() => epochToAgreement(e(2147, 0))).toThrow(/server connection 2148/);
    expect(epochFromAgreement(epochToAgreement(e(2146, 999_999)))).toEqual(e(2146, 999_999));
  });
});
