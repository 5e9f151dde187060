/**
 * TCP links over loopback (inside scripts/in-netns.sh): the handshake, frames
 * both ways, backpressure, and strangers refused before a frame is read.
 */
import { randomBytes } from 'node:crypto';
import { connect, createServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LinkCommunicator } from '../../src/comm/communicator.ts';
import { allreduceInPlace } from '../../src/collectives/allreduce.ts';
import { encodeFrames, FrameKind, HEADER_BYTES, MAX_MESSAGE_BYTES } from '../../src/comm/frame.ts';
import type { Link } from '../../src/comm/link.ts';
import { lengthPrefix, LengthPrefixedReader } from '../../src/comm/stream-frames.ts';
import { Inflow, StreamLink } from '../../src/comm/stream-link.node.ts';
import { splitHostPort } from '../../src/comm/tcp-endpoint.ts';
import { makeLinkCertificate } from '../../src/comm/link-cert.node.ts';
import { TcpLinkEndpoint } from '../../src/comm/tcp-link.node.ts';

const ID = { job: 'tcp-test', epoch: 3, from: 0, to: 1 };
const open: { close(): unknown }[] = [];
afterEach(async () => {
  // Links before the listeners that accepted them.
  for (const o of open.splice(0).reverse()) await o.close();
});

async function endpoint(tls = false): Promise<TcpLinkEndpoint & { lines: string[] }> {
  const lines: string[] = [];
  const e = await TcpLinkEndpoint.listen({
    host: '127.0.0.1',
    port: 0,
    log: (l) => lines.push(l),
    tls: tls ? makeLinkCertificate() : undefined,
  });
  open.push(e);
  return Object.assign(e, { lines });
}

function pattern(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (i * 131 + seed * 7) & 255;
  return out;
}

function collect(link: Link): Uint8Array[] {
  const got: Uint8Array[] = [];
  link.onMessage((m) => got.push(m.slice()));
  return got;
}

/** Resolves when `pred` holds, checked on every message the link delivers. */
function until(link: Link, got: Uint8Array[], pred: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    link.onMessage((m) => {
      got.push(m.slice());
      if (pred()) resolve();
    });
    if (pred()) resolve();
  });
}

describe('TCP links', () => {
  it('runs in the private network namespace', () => {
    expect(process.env.RINGTRAIN_NETNS, 'run under scripts/in-netns.sh').toBe('1');
  });

  it("authenticates both ends and carries a communicator's messages both ways", async () => {
    const [a, b] = [await endpoint(), await endpoint()];
    const key = randomBytes(32);
    const accepted = b.accept(ID, key).link;
    const dialled = await a.dial(b.address, ID, key, 5000);
    const listened = await accepted;
    expect([dialled.transport, dialled.peer, listened.peer]).toEqual(['tcp', 1, 0]);
    const c0 = new LinkCommunicator(0, 2, new Map([[1, dialled]]), { peerTimeoutMs: 0 });
    const c1 = new LinkCommunicator(1, 2, new Map([[0, listened]]), { peerTimeoutMs: 0 });
    open.push(c0, c1);
    // Several frames per message, one message each way at once.
    const up = pattern(3 * MAX_MESSAGE_BYTES + 11, 1);
    const down = pattern(5 * MAX_MESSAGE_BYTES + 3, 2);
    const tag = { id: 1, step: 0, chunk: 0 };
    const [, , atOne, atZero] = await Promise.all([
      c0.send(1, tag, up),
      c1.send(0, tag, down),
      c1.recv(0, tag),
      c0.recv(1, tag),
    ]);
    expect(Buffer.compare(atOne, up)).toBe(0);
    expect(Buffer.compare(atZero, down)).toBe(0);
    expect([a.refused, b.refused]).toEqual([0, 0]);
  });

  it('reuses its send buffers, and only once the socket has written them: every message arrives as sent', async () => {
    const [a, b] = [await endpoint(), await endpoint()];
    const key = randomBytes(32);
    const accepted = b.accept(ID, key).link;
    const dialled = await a.dial(b.address, ID, key, 5000);
    const lent = new Set<ArrayBufferLike>();
    let reused = 0;
    const lend = dialled.messageBuffer!.bind(dialled);
    dialled.messageBuffer = (n) => {
      const m = lend(n);
      if (lent.has(m.buffer)) reused++;
      lent.add(m.buffer);
      return m;
    };
    const c0 = new LinkCommunicator(0, 2, new Map([[1, dialled]]), { peerTimeoutMs: 0 });
    const c1 = new LinkCommunicator(1, 2, new Map([[0, await accepted]]), { peerTimeoutMs: 0 });
    open.push(c0, c1);
    // Rounds of 48 one-frame messages (12 MiB, past the 4 MiB high-water mark), each framed as soon as the one
    // before was handed to the link: a buffer lent again before the kernel had its bytes would be overwritten
    // while the socket still holds it.
    for (let round = 0; round < 3; round++) {
      const sent = Array.from({ length: 48 }, (_, j) => pattern(MAX_MESSAGE_BYTES - 16, 100 * round + j));
      const tags = sent.map((_, j) => ({ id: 2, step: round, chunk: j }));
      // A frame overwritten in its header never matches its tag: the receive times out instead of hanging.
      const received = Promise.all(tags.map((t) => c1.recv(0, t, 20_000)));
      for (let j = 0; j < sent.length; j++) await c0.send(1, tags[j], sent[j]);
      const got = await received;
      got.forEach((m, j) => expect(Buffer.compare(m, sent[j]), `round ${round} message ${j}`).toBe(0));
    }
    expect(reused).toBeGreaterThan(48);
  });

  it('receives into reused buffers: a message held while many more arrive keeps its bytes, a released one goes back', async () => {
    const [a, b] = [await endpoint(), await endpoint()];
    const key = randomBytes(32);
    const accepted = b.accept(ID, key).link;
    const dialled = await a.dial(b.address, ID, key, 5000);
    const c0 = new LinkCommunicator(0, 2, new Map([[1, dialled]]), { peerTimeoutMs: 0 });
    const c1 = new LinkCommunicator(1, 2, new Map([[0, await accepted]]), { peerTimeoutMs: 0 });
    open.push(c0, c1);
    // One-frame messages that leave the last byte of a 256 KiB receive buffer free: the receiver marks it
    // before releasing a message, and a later message whose buffer carries the mark got that memory back.
    const size = MAX_MESSAGE_BYTES - HEADER_BYTES - 1024;
    const lastByte = (m: Uint8Array) => new Uint8Array(m.buffer, MAX_MESSAGE_BYTES - 1, 1);
    const held: { message: Uint8Array; sent: Uint8Array }[] = [];
    let reused = 0;
    let released = 0;
    // 96 messages, six times the free buffers a link keeps; every fourth is held to the end.
    for (let round = 0; round < 3; round++) {
      const sent = Array.from({ length: 32 }, (_, j) => pattern(size, 100 * round + j));
      const tags = sent.map((_, j) => ({ id: 3, step: round, chunk: j }));
      const sending = (async () => {
        for (let j = 0; j < sent.length; j++) await c0.send(1, tags[j], sent[j]);
      })();
      for (let j = 0; j < sent.length; j++) {
        const m = await c1.recv(0, tags[j], 20_000);
        expect(Buffer.compare(m, sent[j]), `round ${round} message ${j}`).toBe(0);
        const pooled = m.buffer.byteLength >= MAX_MESSAGE_BYTES;
        if (pooled && lastByte(m)[0] === 1) reused++;
        if (j % 4 === 0) {
          held.push({ message: m, sent: sent[j] });
          continue;
        }
        if (pooled) lastByte(m)[0] = 1;
        c1.release(0, m);
        // Given back, the message is detached: a view kept past its release reads nothing.
        if (pooled) expect(m.byteLength).toBe(0);
        released += pooled ? 1 : 0;
      }
      await sending;
    }
    held.forEach(({ message, sent }, i) => expect(Buffer.compare(message, sent), `held message ${i}`).toBe(0));
    expect(released).toBeGreaterThan(48);
    expect(reused).toBeGreaterThan(24);
  });

  it('sums exactly in a ring allreduce that gives each message back, call after call', async () => {
    const [a, b] = [await endpoint(), await endpoint()];
    const key = randomBytes(32);
    const accepted = b.accept(ID, key).link;
    const dialled = await a.dial(b.address, ID, key, 5000);
    const comms = [
      new LinkCommunicator(0, 2, new Map([[1, dialled]]), { peerTimeoutMs: 0 }),
      new LinkCommunicator(1, 2, new Map([[0, await accepted]]), { peerTimeoutMs: 0 }),
    ];
    open.push(...comms);
    // 4 MiB (16 messages each way per call): integers and halves, so every sum is exact in float32.
    const n = 1 << 20;
    const bufs = [0, 1].map((r) => Float32Array.from({ length: n }, (_, i) => (i % 1000) + r * 0.5));
    const expected = Float32Array.from({ length: n }, (_, i) => 2 * (i % 1000) + 0.5);
    // The second and third calls go ahead on the cached agreement (a fingerprint in front of the first messages).
    for (let call = 0; call < 3; call++) {
      await Promise.all(comms.map((c, r) => allreduceInPlace(c, bufs[r], { name: 'g', op: 'sum', algorithm: 'ring' })));
      for (const buf of bufs)
        expect(Buffer.compare(new Uint8Array(buf.buffer), new Uint8Array(expected.buffer))).toBe(0);
      for (let i = 0; i < n; i++) expected[i] *= 2;
    }
  });

  it('holds writes at the high-water mark while the reader is stalled, and loses nothing', async () => {
    const server = createServer();
    open.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const far = new Promise<Socket>((r) => server.once('connection', r));
    const near = connect((server.address() as { port: number }).port, '127.0.0.1');
    const receiving = await far;
    receiving.pause();
    const sender = new StreamLink(
      1,
      { read: Inflow.ofDataEvents(near) },
      new LengthPrefixedReader(MAX_MESSAGE_BYTES, () => {}),
    );
    const receiver = new StreamLink(
      0,
      { read: Inflow.ofDataEvents(receiving) },
      new LengthPrefixedReader(MAX_MESSAGE_BYTES, () => {}),
    );
    open.push(sender, receiver);
    const highWater = 1 << 20;
    const frames = encodeFrames(FrameKind.Data, { id: 9, step: 0, chunk: 0 }, pattern(24 << 20, 3));
    let peak = 0;
    let waits = 0;
    const writing = (async () => {
      for (const f of frames) {
        // The communicator's rule: no frame goes while the buffer is past the mark.
        while (sender.bufferedAmount() > highWater - f.byteLength) {
          waits++;
          await sender.waitForRoom(100);
        }
        sender.send(f);
        peak = Math.max(peak, sender.bufferedAmount());
      }
    })();
    // With the reader stalled, the kernel's buffers fill and the sender has to wait on the socket.
    while (waits === 0) await new Promise((r) => setTimeout(r, 10));
    expect(peak).toBeLessThanOrEqual(highWater + MAX_MESSAGE_BYTES);
    const got: Uint8Array[] = [];
    const all = until(receiver, got, () => got.length === frames.length);
    receiving.resume();
    await Promise.all([writing, all]);
    expect(peak).toBeLessThanOrEqual(highWater + MAX_MESSAGE_BYTES);
    expect(got.length).toBe(frames.length);
    for (let i = 0; i < frames.length; i += 37) expect(Buffer.compare(got[i], frames[i])).toBe(0);
    expect(Buffer.compare(got.at(-1)!, frames.at(-1)!)).toBe(0);
  });

  it('refuses a peer without the key, and one speaking frames at once, before any frame is read', async () => {
    const [listener, stranger] = [await endpoint(), await endpoint()];
    const key = randomBytes(32);
    const accepted = listener.accept(ID, key).link;
    let handed: Link | null = null;
    void accepted.then(
      (l) => (handed = l),
      () => {},
    );
    // Right identity, wrong key: the listener's answer does not check out, and the dialer's proof is refused.
    await expect(stranger.dial(listener.address, ID, randomBytes(32), 5000)).rejects.toThrow(
      /does not hold this epoch's link key/,
    );
    // A raw connection that sends a data frame straight away.
    const target = splitHostPort(listener.address)!;
    const raw = connect(target.port, target.host);
    const frame = encodeFrames(FrameKind.Data, { id: 1, step: 0, chunk: 0 }, pattern(64, 4))[0];
    raw.on('connect', () => raw.write(Buffer.concat([lengthPrefix(frame.byteLength), frame])));
    await new Promise((r) => raw.on('close', r));
    // A length far past the handshake's cap.
    const huge = connect(target.port, target.host);
    huge.on('connect', () => huge.write(lengthPrefix(0xffffffff)));
    await new Promise((r) => huge.on('close', r));
    // Three refusals: the keyless dialer (it hung up on the listener's proof), the frame, the length.
    expect(listener.refused).toBe(3);
    expect(listener.lines.join('\n')).toMatch(
      /closed during the handshake[\s\S]*not a ringtrain link hello[\s\S]*at most 1024 are allowed/,
    );
    expect(handed).toBeNull();
    // The honest peer still gets in afterwards, and only its frames arrive.
    const honest = await endpoint();
    const link = await honest.dial(listener.address, ID, key, 5000);
    const far = await accepted;
    const got: Uint8Array[] = [];
    const arrived = until(far, got, () => got.length === 1);
    link.send(frame);
    await arrived;
    expect(Buffer.compare(got[0], frame)).toBe(0);
    link.close();
  });

  it('refuses a dial for a link nobody expects, and a dial to a closed port fails fast', async () => {
    const listener = await endpoint();
    const dialer = await endpoint();
    const key = randomBytes(32);
    listener.accept(ID, key);
    await expect(dialer.dial(listener.address, { ...ID, epoch: 4 }, key, 5000)).rejects.toThrow(
      /closed the connection/,
    );
    expect(listener.lines.join('\n')).toMatch(/no link from rank 0 to rank 1 of epoch 4/);
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as { port: number }).port;
    await new Promise((r) => closed.close(r));
    await expect(dialer.dial(`127.0.0.1:${port}`, ID, key, 5000)).rejects.toThrow(/ECONNREFUSED/);
  });

  it('dials each direction from the end that reads it: a dialler the listener cannot dial back gets no link', async () => {
    const listener = await endpoint();
    const key = randomBytes(32);
    const accepted = listener.accept(ID, key).link;
    // A dialler that advertises a port nobody listens on: it proves the key, but the connection back fails.
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as { port: number }).port;
    await new Promise((r) => closed.close(r));
    const lines: string[] = [];
    const unreachable = await TcpLinkEndpoint.listen({ advertise: `127.0.0.1:${port}`, log: (l) => lines.push(l) });
    open.push(unreachable);
    await expect(unreachable.dial(listener.address, ID, key, 5000)).rejects.toThrow(/before dialling back/);
    expect(listener.lines.join('\n')).toMatch(/could not dial back to 127\.0\.0\.1:\d+ .*ECONNREFUSED/);
    // The link is still expected: an honest dialler gets it, and messages cross both ways whole.
    const dialler = await endpoint();
    const link = await dialler.dial(listener.address, ID, key, 5000);
    const far = await accepted;
    const frames = [pattern(MAX_MESSAGE_BYTES, 6), pattern(77, 7), pattern(MAX_MESSAGE_BYTES - 5, 8)];
    const [up, down]: Uint8Array[][] = [[], []];
    const arrived = [until(far, up, () => up.length === 3), until(link, down, () => down.length === 3)];
    for (const f of frames) [link, far].forEach((l) => l.send(f));
    await Promise.all(arrived);
    for (const got of [up, down]) frames.forEach((f, i) => expect(Buffer.compare(got[i], f)).toBe(0));
    // The listener refused nobody: both dials proved the key.
    expect(listener.refused).toBe(0);
    link.close();
  });

  it('--link-tls: encrypts the link to a listener whose certificate has the relayed fingerprint, and no other', async () => {
    const [listener, dialer, other] = [await endpoint(true), await endpoint(), await endpoint(true)];
    expect(listener.tlsFingerprint).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    const key = randomBytes(32);
    const accepted = listener.accept(ID, key).link;
    // Another certificate than the one relayed: the dialer hangs up before sending its hello.
    await expect(dialer.dial(listener.address, ID, key, 5000, other.tlsFingerprint)).rejects.toThrow(
      /TLS certificate .* is not the one it advertised/,
    );
    // Plain TCP to a TLS listener never gets as far as a hello.
    await expect(dialer.dial(listener.address, ID, key, 5000)).rejects.toThrow(/closed the connection|ECONNRESET/);
    const link = await dialer.dial(listener.address, ID, key, 5000, listener.tlsFingerprint);
    const far = await accepted;
    expect([link.transport, far.transport]).toEqual(['tls', 'tls']);
    const payload = pattern(3 * MAX_MESSAGE_BYTES, 5);
    const frames = encodeFrames(FrameKind.Data, { id: 2, step: 0, chunk: 0 }, payload);
    const got: Uint8Array[] = [];
    const arrived = until(far, got, () => got.length === frames.length);
    for (const f of frames) link.send(f);
    await arrived;
    frames.forEach((f, i) => expect(Buffer.compare(got[i], f)).toBe(0));
    expect(listener.refused).toBe(2);
    link.close();
  });
});
