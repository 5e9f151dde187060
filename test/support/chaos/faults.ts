/**
 * Fault injection for tests and benchmarks: the chaos entry (main.ts beside
 * this file, `worker --chaos SPEC`) makes one worker misbehave so that tests
 * can show the others name it and eject it. The shipped CLI never loads this
 * file; it reaches the worker through the trainer's general hooks. Forms:
 *
 *   nan[@step:N]            its gradients become NaN (from step N on; default 0)
 *   scale:K[@step:N]        its gradients are multiplied by K (K < 0 flips their sign)
 *   garbage-frames[@step:N] at step N it sends every peer a 5-byte frame that is no frame
 *   forge-abort[@step:N]    at step N it sends every peer an abort blaming another rank
 *   flood-tags[@step:N]     at step N it floods every peer with frames for tags nobody waits for
 *   slow:Kx                 each step's compute takes K times as long (it sleeps the difference)
 *   flip-bits[@step:N]      from step N on, its link to its right neighbour flips bits in transit
 *                           (caught only by the verified allreduce: the sketches it publishes are honest)
 *   flip-link[@step:N]      from step N on, the link itself (TCP or WebRTC) to its right neighbour flips
 *                           bits in the data frames it carries, below the communicator: framing, tags and
 *                           the process above are honest, as with a corrupting NIC or middlebox
 *   lie-nan[@step:N]        it publishes its honest norm and sketches, then sends NaN into the ring
 *   lie-scale:K[@step:N]    it publishes its honest norm and sketches, then sends its gradient times K
 *   relay-norm[@step:N]     at step N (once), the blocks of other ranks it passes on in the step checks'
 *                           gradient-sketches gather get NaN for their first value (a norm): a relayer
 *                           framing the author
 *   lie-accuse[@step:N]     as lie-nan, and it claims its left neighbour sent it the NaN it passes on
 *                           (its signed link digest says so: accuse.ts)
 */
import { ErrorCode, RingtrainError } from '../../../src/core/errors.ts';
import type { Communicator } from '../../../src/comm/interface.ts';
import { FrameKind, HEADER_BYTES } from '../../../src/comm/frame.ts';
import type { Link } from '../../../src/comm/link.ts';
import { FAST_STEP_BIT } from '../../../src/collectives/controller/negotiate.ts';
import { PHASE_ALLGATHER } from '../../../src/collectives/transfer/ring.ts';
import { keysOf } from '../../../src/distributed/session/ring-keys.ts';
import { signedForHop } from '../../../src/distributed/session/signed-gather.ts';
import { accuseOnSend } from './accuse.ts';
import { interceptSends } from '../intercept-sends.ts';

export type Fault =
  | { kind: 'nan'; fromStep: number }
  | { kind: 'scale'; factor: number; fromStep: number }
  | { kind: 'garbage-frames'; fromStep: number }
  | { kind: 'forge-abort'; fromStep: number }
  | { kind: 'flood-tags'; fromStep: number }
  | { kind: 'slow'; factor: number; fromStep: number }
  | { kind: 'flip-bits'; fromStep: number }
  | { kind: 'flip-link'; fromStep: number }
  | { kind: 'lie-nan'; fromStep: number }
  | { kind: 'lie-scale'; factor: number; fromStep: number }
  | { kind: 'relay-norm'; fromStep: number }
  | { kind: 'lie-accuse'; fromStep: number };

const FORMS =
  'nan[@step:N], scale:K[@step:N], garbage-frames[@step:N], forge-abort[@step:N], flood-tags[@step:N], slow:Kx, flip-bits[@step:N], flip-link[@step:N], lie-nan[@step:N], lie-scale:K[@step:N], relay-norm[@step:N], lie-accuse[@step:N]';

function bad(spec: string, why: string): RingtrainError {
  return new RingtrainError(ErrorCode.InvalidArgument, `--chaos '${spec}': ${why}. The forms are ${FORMS}`);
}

export function parseFault(spec: string): Fault {
  const [body, when, ...rest] = spec.trim().split('@');
  if (rest.length) throw bad(spec, 'more than one @');
  let fromStep = 0;
  if (when !== undefined) {
    const m = /^step:(\d+)$/.exec(when);
    if (!m) throw bad(spec, `'@${when}' is not @step:N`);
    fromStep = Number(m[1]);
  }
  const [kind, arg, ...more] = body.split(':');
  if (more.length) throw bad(spec, 'too many colons');
  const noArg = (
    k:
      | 'nan'
      | 'garbage-frames'
      | 'forge-abort'
      | 'flood-tags'
      | 'flip-bits'
      | 'flip-link'
      | 'lie-nan'
      | 'relay-norm'
      | 'lie-accuse',
  ): Fault => {
    if (arg !== undefined) throw bad(spec, `${k} takes no value`);
    return { kind: k, fromStep };
  };
  switch (kind) {
    case 'nan':
    case 'garbage-frames':
    case 'forge-abort':
    case 'flood-tags':
    case 'flip-bits':
    case 'flip-link':
    case 'lie-nan':
    case 'relay-norm':
    case 'lie-accuse':
      return noArg(kind);
    case 'scale':
    case 'lie-scale': {
      const factor = Number(arg);
      if (arg === undefined || arg === '' || !Number.isFinite(factor) || factor === 0)
        throw bad(spec, `${kind} needs a finite, non-zero factor, like ${kind}:1e30 or ${kind}:-20`);
      return { kind, factor, fromStep };
    }
    case 'slow': {
      const m = /^(\d+(?:\.\d+)?)x$/.exec(arg ?? '');
      const factor = m ? Number(m[1]) : NaN;
      if (!(factor >= 1)) throw bad(spec, 'slow needs a factor of at least 1, like slow:3x');
      return { kind, factor, fromStep };
    }
    default:
      throw bad(spec, `unknown fault '${kind}'`);
  }
}

/** Changes this rank's gradients in place as the fault says (gradient faults only). */
export function tamperGradients(fault: Fault, grads: Float32Array, step: number): void {
  if (step < fault.fromStep) return;
  if (fault.kind === 'nan') grads.fill(NaN);
  else if (fault.kind === 'scale') for (let i = 0; i < grads.length; i++) grads[i] *= fault.factor;
}

/** lie-…: changes the contribution after its honest norm and sketches were published (the trainer's transformContribution). */
export function lieAfterChecks(fault: Fault, grads: Float32Array, step: number): void {
  if (step < fault.fromStep) return;
  if (fault.kind === 'lie-nan' || fault.kind === 'lie-accuse') grads.fill(NaN);
  else if (fault.kind === 'lie-scale') for (let i = 0; i < grads.length; i++) grads[i] *= fault.factor;
}

/** A communicator over links (LinkCommunicator): the wire faults put raw bytes on the link under it. */
export interface RawWire {
  linkTo(peer: number): Pick<Link, 'send' | 'sendInPlace' | 'transport'> | undefined;
}

function hasRawWire(c: unknown): c is RawWire {
  return typeof (c as Partial<RawWire>).linkTo === 'function';
}

/** The flood: well-formed messages with tags no collective uses (ids from the top of the range), 200 MB in all. */
const FLOOD_MESSAGE_BYTES = 200 * 1024;
export const FLOOD_MESSAGES = 1024;

function abortFrame(note: unknown): Uint8Array {
  const body = new TextEncoder().encode(JSON.stringify(note));
  const f = new Uint8Array(16 + body.byteLength);
  f[0] = 2; // abort
  f[1] = 1;
  f.set(body, 16);
  return f;
}

/**
 * Runs a fault's wire misbehaviour once, when training reaches its step.
 * Returns true when it acted. Frames are built by hand on purpose: they are
 * what a peer running other code could send.
 */
export async function misbehaveOnWire(
  fault: Fault,
  comm: Communicator,
  step: number,
  say?: (line: string) => void,
): Promise<boolean> {
  if (step !== fault.fromStep) return false;
  if (fault.kind !== 'garbage-frames' && fault.kind !== 'forge-abort' && fault.kind !== 'flood-tags') return false;
  if (!hasRawWire(comm))
    throw new RingtrainError(ErrorCode.InvalidArgument, `--chaos ${fault.kind} needs a communicator over links`);
  const peers = [...Array(comm.size).keys()].filter((p) => p !== comm.rank);
  const unsent: string[] = [];
  for (const peer of peers) {
    try {
      if (fault.kind === 'garbage-frames') comm.linkTo(peer)?.send(new Uint8Array([0xde, 0xad, 0xbe, 0xef, 0x99]));
      if (fault.kind === 'forge-abort') {
        // Blame a rank that is neither the sender nor the receiver.
        const victim = peers.find((p) => p !== peer) ?? peer;
        comm
          .linkTo(peer)
          ?.send(
            abortFrame({ code: ErrorCode.PeerLost, message: `rank ${victim} went away`, detail: { peer: victim } }),
          );
      }
    } catch (e) {
      // A link that is down is not this fault's business, but a test reading the outcome should know.
      unsent.push(`rank ${peer}: ${(e as Error).message}`);
    }
  }
  if (unsent.length) say?.(`--chaos ${fault.kind}: nothing went to ${unsent.join('; ')}`);
  if (fault.kind === 'flood-tags') {
    // Through the communicator's own queue (well-formed, with its backpressure: an unpaced
    // flood would overrun libwebrtc's send buffer and close our own channel first).
    const payload = new Uint8Array(FLOOD_MESSAGE_BYTES);
    await Promise.all(
      peers.map(async (peer) => {
        for (let i = 0; i < FLOOD_MESSAGES && !comm.error; i++)
          await comm.send(peer, { id: 0xfff00000 + i, step: 0, chunk: 0 }, payload);
      }),
    ).catch(() => {}); // the receivers cut us off: the point of the test
  }
  return true;
}

/** slow:Kx: how long to sleep after a step that took `stepMs`. */
export function slowdownMs(fault: Fault, stepMs: number, step: number): number {
  return fault.kind === 'slow' && step >= fault.fromStep ? (fault.factor - 1) * stepMs : 0;
}

/** Messages at least this long are gradient segments; shorter ones (negotiation, the guard's sketches) pass untouched. */
const FLIP_MIN_BYTES = 4096;
/** Every this many float32 values one bit is flipped. */
const FLIP_STRIDE = 61;
/** A bit of the exponent: the value is multiplied or divided by 2^16 (finite either way, so no NaN check sees it). */
const FLIP_BIT = 27;

const corrupted = new WeakSet<Communicator>();

/**
 * A copy of a message's bytes that owns its buffer. A payload received over WebRTC under Deno is a
 * Node Buffer viewing part of a larger one (simple-peer hands out Buffers), whose slice() copies
 * nothing: a fault that changed such a "copy" changed what this rank received, and one that wrote
 * through its `.buffer` changed bytes outside the message and left the message as it was.
 */
function ownCopy(payload: Uint8Array): Uint8Array<ArrayBuffer> {
  return new Uint8Array(payload);
}

/**
 * flip-bits: from now on this rank's messages to its right neighbour (the
 * ring's direction) that are long enough to be gradient segments arrive with
 * an exponent bit flipped in every FLIP_STRIDE-th float32. The communicator's
 * `send` is wrapped on this instance only; a re-formed ring is wrapped anew.
 */
export function flipBitsOnSend(comm: Communicator): void {
  if (corrupted.has(comm) || comm.size < 2) return;
  corrupted.add(comm);
  const right = (comm.rank + 1) % comm.size;
  interceptSends(comm, (send) => (peer, tag, payload) => {
    if (peer !== right || payload.byteLength < FLIP_MIN_BYTES) return send(peer, tag, payload);
    const copy = ownCopy(payload);
    for (let i = 0; i + 4 <= copy.byteLength; i += 4 * FLIP_STRIDE) copy[i + (FLIP_BIT >> 3)] ^= 1 << (FLIP_BIT & 7);
    return send(peer, tag, copy);
  });
}

const corruptedLinks = new WeakSet<object>();

/**
 * flip-link: from now on the link under this rank's messages to its right neighbour flips the
 * same exponent bit as flip-bits in the data frames it carries (those long enough to hold
 * gradient segments), past each frame's header: the receiver's framing and tags hold, only the
 * numbers change, as a link that corrupts bytes in transit would. This one link object is
 * wrapped; a re-formed ring's new links are not, unless the fault wraps them too.
 */
export function flipBitsOnLink(comm: Communicator, say?: (line: string) => void): void {
  if (!hasRawWire(comm))
    throw new RingtrainError(ErrorCode.InvalidArgument, '--chaos flip-link needs a communicator over links');
  if (comm.size < 2) return;
  const right = (comm.rank + 1) % comm.size;
  const link = comm.linkTo(right);
  if (!link || corruptedLinks.has(link)) return;
  corruptedLinks.add(link);
  const send = link.send.bind(link);
  // Messages lent to this link go through send() as copies, so every data frame passes the flip below.
  link.sendInPlace = undefined;
  link.send = (frame) => {
    if (frame[0] !== FrameKind.Data || frame.byteLength < HEADER_BYTES + FLIP_MIN_BYTES) return send(frame);
    const copy = frame.slice();
    // Fragments start on 4-byte boundaries of their message, so these are the float32 values' high bytes.
    for (let i = HEADER_BYTES; i + 4 <= copy.byteLength; i += 4 * FLIP_STRIDE)
      copy[i + (FLIP_BIT >> 3)] ^= 1 << (FLIP_BIT & 7);
    send(copy);
  };
  say?.(`--chaos flip-link: the ${link.transport ?? 'in-process'} link to rank ${right} flips bits from now on`);
}

/** Messages of a ring allgather's phase (collectives/transfer/ring.ts) at hop 1 or later carry a block of another rank. */
function isRelayedBlock(tag: { step: number }, payload: Uint8Array): boolean {
  // The tag's step is (phase << 16) | hop, with FAST_STEP_BIT on a cached agreement's fast path (collectives/controller/run.ts).
  const step = tag.step & ~FAST_STEP_BIT;
  return step >>> 16 === PHASE_ALLGATHER && (step & 0xffff) > 0 && payload.byteLength < FLIP_MIN_BYTES;
}

/**
 * relay-norm: while `now()` (the fault's step, on the ring it first came on), the blocks of other
 * ranks this rank passes on in the first ring allgather of small messages it relays (the step
 * checks' gradient-sketches gather, which a step starts before its allreduce; later gathers, the
 * verify verdicts among them, pass untouched) leave with NaN as their first value, the author's
 * gradient norm. Where the ring signs its checks, it signs the hop as the protocol asks
 * (signed-gather.ts), under that gather's name, over what it really sends.
 */
function relayNormOnSend(comm: Communicator, step: number, now: () => boolean): void {
  let gather: number | undefined;
  interceptSends(comm, (send) => (peer, tag, payload) => {
    if (!now() || !isRelayedBlock(tag, payload)) return send(peer, tag, payload);
    gather ??= tag.id;
    if (tag.id !== gather) return send(peer, tag, payload);
    const copy = ownCopy(payload);
    new DataView(copy.buffer, copy.byteOffset, copy.byteLength).setFloat32(0, NaN, true);
    const keys = keysOf(comm);
    if (!keys) return send(peer, tag, copy);
    const author = (comm.rank - (tag.step & 0xffff) + comm.size) % comm.size;
    return signedForHop(keys, { name: 'gradient-sketches', step }, comm.rank, author, copy).then((signed) =>
      send(peer, tag, signed),
    );
  });
}

/**
 * The trainer's `transformGradients` hook for a fault: changes the gradients,
 * misbehaves on the wire when the fault's step comes (without waiting for it:
 * the step goes on as a real attacker's would), or sleeps (slow:Kx).
 */
export function faultHook(
  fault: Fault,
  comm: () => Communicator,
  say?: (line: string) => void,
): (grads: Float32Array, step: number, computeMs?: number) => Promise<void> {
  let lastCall = 0;
  let current = -1;
  let relayed = false;
  return async (grads, step, computeMs) => {
    tamperGradients(fault, grads, step);
    if (fault.kind === 'flip-bits' && step >= fault.fromStep) flipBitsOnSend(comm());
    if (fault.kind === 'flip-link' && step >= fault.fromStep) flipBitsOnLink(comm(), say);
    current = step;
    if (fault.kind === 'lie-accuse' && step >= fault.fromStep)
      accuseOnSend(comm(), fault.fromStep, () => current, grads.length);
    // Once: the ring that breaks over it re-forms and redoes the step honestly.
    if (fault.kind === 'relay-norm' && step === fault.fromStep && !relayed) {
      relayed = true;
      relayNormOnSend(comm(), step, () => current === fault.fromStep);
    }
    void misbehaveOnWire(fault, comm(), step, say).catch(() => {});
    const t = Date.now();
    // The step's own compute when the trainer says it (not the waiting for others, which a slower device does not
    // multiply).
    const pause =
      computeMs !== undefined
        ? slowdownMs(fault, computeMs, step)
        : lastCall > 0
          ? slowdownMs(fault, t - lastCall, step)
          : 0;
    if (pause > 0) await new Promise((r) => setTimeout(r, pause));
    lastCall = Date.now();
  };
}
