/**
 * Signed check values over memory links (signed-gather.ts, ring-keys.ts): every rank's block
 * arrives as its author signed it; a rank that rewrites a block it forwards is named by the rank
 * it hands it to (with a proof the others check, when it signed its hop), and the block's author
 * by nobody; a ring without keys gathers as before.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_STEP_BIT } from '../../src/collectives/controller/negotiate.ts';
import { PHASE_ALLGATHER } from '../../src/collectives/transfer/ring.ts';
import type { LinkCommunicator } from '../../src/comm/communicator.ts';
import type { Communicator } from '../../src/comm/interface.ts';
import type { Misbehaviour } from '../../src/comm/misbehaviour.ts';
import { keysOf } from '../../src/distributed/session/ring-keys.ts';
import { proofOf, provenRelayer, signedAllgather, signedForHop } from '../../src/distributed/session/signed-gather.ts';
import { until } from '../support/workers.ts';
import { ring, signedRing } from './memory-ring.ts';
import { interceptSends } from '../support/intercept-sends.ts';

const opened: Communicator[] = [];
afterEach(async () => {
  for (const c of opened.splice(0)) await c.close().catch(() => {});
});

async function openSignedRing(size: number) {
  const r = await signedRing(size);
  opened.push(...r.comms);
  return r;
}

/**
 * The rank rewrites the first value of every block it forwards (not its own); `signHop`: and signs
 * the hop over what it sends, as the protocol asks, else leaves the hop signature it made for the original.
 */
function rewriteForwarded(comm: Communicator, signHop: boolean): void {
  interceptSends(comm, (send) => (peer, tag, payload) => {
    // Hop 0 of the ring allgather's phase carries its own block; later hops pass others' on.
    const step = tag.step & ~FAST_STEP_BIT;
    if (step >> 16 !== PHASE_ALLGATHER || (step & 0xffff) === 0) return send(peer, tag, payload);
    const copy = payload.slice();
    new Float32Array(copy.buffer, 0, 1)[0] = NaN;
    if (!signHop) return send(peer, tag, copy);
    const author = (comm.rank - (step & 0xffff) + comm.size) % comm.size;
    return signedForHop(keysOf(comm)!, { name: 'checks', step: 7 }, comm.rank, author, copy).then((b) =>
      send(peer, tag, b),
    );
  });
}

async function gatherWithRelayer(signHop: boolean) {
  const { comms, seen } = await openSignedRing(4);
  rewriteForwarded(comms[RELAYER], signHop);
  const named: Misbehaviour[] = [];
  const results = await Promise.allSettled(
    comms.map((c) =>
      signedAllgather(c, Float32Array.of(1, 2, 3), {
        name: 'checks',
        step: 7,
        timeoutMs: 5000,
        misbehaviour: { peerMisbehaved: (m) => void named.push(m) },
      }),
    ),
  );
  const events = seen.flat().filter((e) => e.type === 'peer-misbehaved') as { peer: number }[];
  return { comms, named, events, results };
}

const RELAYER = 1;

describe('signedAllgather', () => {
  it('gives every rank every block as its author signed it', async () => {
    const { comms } = await openSignedRing(4);
    const got = await Promise.all(
      comms.map((c) => signedAllgather(c, Float32Array.of(c.rank + 0.5, -c.rank), { name: 'checks', step: 3 })),
    );
    for (const g of got) expect(Array.from(g)).toEqual([0.5, -0, 1.5, -1, 2.5, -2, 3.5, -3]);
  });

  it('names the relayer that rewrote a forwarded block and signed its hop, with a proof every rank can check', async () => {
    const { comms, named, events, results } = await gatherWithRelayer(true);
    // The rank it hands blocks to sees the first bad one and names it; nobody names the author.
    expect(named.map((m) => [m.rank, m.peer])).toEqual([[2, RELAYER]]);
    expect(named[0].reason).toMatch(/passed on rank 0's checks block changed/);
    expect(events.map((e) => e.peer)).toEqual([RELAYER]);
    const failed = results[2] as PromiseRejectedResult;
    expect(failed.reason).toMatchObject({ code: 'ERR_PEER_MISBEHAVED', detail: { peer: RELAYER, author: 0, step: 7 } });
    // The proof went to every rank in the abort note, and holds there.
    const proof = proofOf(failed.reason.detail)!;
    expect(proof).toMatchObject({ author: 0, relayer: RELAYER, step: 7, name: 'checks' });
    for (const r of [0, 3]) {
      await until(() => (comms[r] as LinkCommunicator).relayProofs.length > 0, `rank ${r} to hear the proof`, 5000);
      expect(
        await provenRelayer(comms[r], proofOf({ relayProof: (comms[r] as LinkCommunicator).relayProofs[0] })!),
      ).toBe(RELAYER);
    }
    // A proof that names another relayer, or whose block is the author's own, convicts no one.
    expect(await provenRelayer(comms[0], { ...proof, relayer: 3 })).toBeNull();
  });

  it('names a relayer whose hop signature fails on the word of the rank it handed the block to, with no proof', async () => {
    const { named, events, results } = await gatherWithRelayer(false);
    expect(named.map((m) => [m.rank, m.peer])).toEqual([[2, RELAYER]]);
    expect(named[0].reason).toMatch(/does not carry its signature/);
    expect(events.map((e) => e.peer)).toEqual([RELAYER]);
    expect(proofOf((results[2] as PromiseRejectedResult).reason.detail)).toBeUndefined();
  });

  it('gathers unsigned when the ring has no keys', async () => {
    const { comms } = ring(3);
    opened.push(...comms);
    const got = await Promise.all(comms.map((c) => signedAllgather(c, Int32Array.of(c.rank), { name: 'x', step: 0 })));
    for (const g of got) expect(Array.from(g)).toEqual([0, 1, 2]);
  });
});
