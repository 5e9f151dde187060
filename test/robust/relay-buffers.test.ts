/**
 * Blocks received as Node Buffers (what simple-peer hands out under Deno): a Buffer's slice() is a
 * view, not a copy. The relay-norm fault once "copied" a received sketches block with slice() and
 * wrote its NaN through the view's `.buffer` at offset 0, outside the block: the block went on
 * unchanged under a valid hop signature, and the real-process test (relayed-checks.test.ts) failed
 * whenever the transport delivered a block as such a view. Here, over memory links, every block
 * rank 1 receives is handed to it as a Buffer viewing part of a larger one.
 */
import { Buffer } from 'node:buffer';
import { afterEach, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/comm/interface.ts';
import type { Misbehaviour } from '../../src/comm/misbehaviour.ts';
import { keysOf } from '../../src/distributed/session/ring-keys.ts';
import { signedAllgather, signedForHop } from '../../src/distributed/session/signed-gather.ts';
import { faultHook, parseFault } from '../support/chaos/faults.ts';
import { ring, signedRing } from './memory-ring.ts';

const opened: Communicator[] = [];
afterEach(async () => {
  for (const c of opened.splice(0)) await c.close().catch(() => {});
});

/** Bytes before the view in its Buffer: a frame's header and more, as where a transport batches messages. */
const OFFSET = 68;

function bufferView(bytes: Uint8Array): Buffer {
  const pool = Buffer.alloc(OFFSET + bytes.byteLength + 32, 0x5a);
  pool.set(bytes, OFFSET);
  return pool.subarray(OFFSET, OFFSET + bytes.byteLength);
}

async function openSignedRing(size: number) {
  const r = await signedRing(size);
  opened.push(...r.comms);
  return r.comms;
}

/** `comm` receives every message as a Buffer viewing part of a larger one. */
function receiveAsBufferViews(comm: Communicator): void {
  const recv = comm.recv.bind(comm);
  comm.recv = async (peer, tag, timeoutMs) => bufferView(await recv(peer, tag, timeoutMs));
}

describe('blocks received as Buffer views', () => {
  it('signedForHop signs a copy and leaves the block it was given, and the bytes around it, as they were', async () => {
    const [comm] = await openSignedRing(3);
    const block = bufferView(Uint8Array.from({ length: 192 }, (_, i) => i));
    const pool = new Uint8Array(block.buffer.slice(0));
    const onward = await signedForHop(keysOf(comm)!, { name: 'checks', step: 1 }, 0, 2, block);
    expect(new Uint8Array(block.buffer)).toEqual(pool);
    expect(onward.buffer).not.toBe(block.buffer);
    expect(Array.from(onward.subarray(0, 128))).toEqual(Array.from(block.subarray(0, 128)));
    expect(Array.from(onward.subarray(128))).not.toEqual(Array.from(block.subarray(128)));
  });

  it('--chaos relay-norm rewrites the sketches block it passes on, so the next rank names the relayer, not the author', async () => {
    const comms = await openSignedRing(3);
    const relayer = comms[1];
    receiveAsBufferViews(relayer);
    await faultHook(parseFault('relay-norm@step:3'), () => relayer)(new Float32Array(4), 3);
    const named: Misbehaviour[] = [];
    const results = await Promise.allSettled(
      comms.map((c) =>
        signedAllgather(c, Float32Array.of(1 + c.rank, 2, 3), {
          name: 'gradient-sketches',
          step: 3,
          timeoutMs: 5000,
          misbehaviour: { peerMisbehaved: (m) => void named.push(m) },
        }),
      ),
    );
    expect(named.map((m) => [m.rank, m.peer])).toEqual([[2, 1]]);
    expect(named[0].reason).toMatch(/passed on rank 0's gradient-sketches block changed/);
    expect((results[2] as PromiseRejectedResult).reason).toMatchObject({
      code: 'ERR_PEER_MISBEHAVED',
      detail: { peer: 1, author: 0, step: 3 },
    });
  });
});
