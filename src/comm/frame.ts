/**
 * Framing on a link. Every message on the wire is one frame: a 16-byte header
 * and up to MAX_FRAME_PAYLOAD bytes. A logical message bigger than that is cut
 * into fragments that travel back to back (a link is ordered), the last one
 * flagged, so the receiver glues them together again.
 *
 * Header (little endian):
 *   u8  kind     data | heartbeat | abort | goodbye
 *   u8  flags    bit 0: last fragment of a data message
 *   u16 reserved
 *   u32 id       collective id (the same on every rank for one collective)
 *   u32 step     ring step (or a control slot such as negotiation)
 *   u32 chunk    chunk or segment index within the step
 */
import type { Tag } from './interface.ts';

export type { Tag } from './interface.ts';

/** libwebrtc's default data-channel message limit; nothing on the wire is bigger. */
export const MAX_MESSAGE_BYTES = 256 * 1024;
export const HEADER_BYTES = 16;
export const MAX_FRAME_PAYLOAD = MAX_MESSAGE_BYTES - HEADER_BYTES;

export const FrameKind = { Data: 0, Heartbeat: 1, Abort: 2, Goodbye: 3 } as const;
export type FrameKind = (typeof FrameKind)[keyof typeof FrameKind];

const LAST_FRAGMENT = 1;

export interface Frame extends Tag {
  kind: FrameKind;
  last: boolean;
  payload: Uint8Array;
}

export function tagKey(t: Tag): string {
  return `${t.id}:${t.step}:${t.chunk}`;
}

function header(kind: FrameKind, last: boolean, tag: Tag, out: Uint8Array): void {
  const v = new DataView(out.buffer, out.byteOffset, HEADER_BYTES);
  v.setUint8(0, kind);
  v.setUint8(1, last ? LAST_FRAGMENT : 0);
  v.setUint16(2, 0, true);
  v.setUint32(4, tag.id >>> 0, true);
  v.setUint32(8, tag.step >>> 0, true);
  v.setUint32(12, tag.chunk >>> 0, true);
}

/** The pieces a payload travels in, one a frame, back to back (a link is ordered); an empty payload is one empty piece. */
function fragmentsOf(payload: Uint8Array): { body: Uint8Array; last: boolean }[] {
  const pieces: { body: Uint8Array; last: boolean }[] = [];
  let offset = 0;
  do {
    const n = Math.min(MAX_FRAME_PAYLOAD, payload.byteLength - offset);
    pieces.push({ body: payload.subarray(offset, offset + n), last: offset + n >= payload.byteLength });
    offset += n;
  } while (offset < payload.byteLength);
  return pieces;
}

/**
 * Cuts a payload into ready-to-send frames (copies it, so the caller may reuse its buffer). Each
 * frame is written into `allocate(bytes)`: a link that reuses its buffers hands out one of its own.
 */
export function encodeFrames(
  kind: FrameKind,
  tag: Tag,
  payload: Uint8Array,
  allocate: (bytes: number) => Uint8Array = (bytes) => new Uint8Array(bytes),
): Uint8Array[] {
  return fragmentsOf(payload).map(({ body, last }) => {
    const frame = allocate(HEADER_BYTES + body.byteLength);
    header(kind, last, tag, frame);
    frame.set(body, HEADER_BYTES);
    return frame;
  });
}

/** A frame as a header and a view of the payload it carries (not copied): what a link writes in place. */
export interface FrameParts {
  head: Uint8Array;
  body: Uint8Array;
}

/** Cuts a payload into frames without copying it: each frame's body is a view of `payload`. */
export function frameParts(kind: FrameKind, tag: Tag, payload: Uint8Array): FrameParts[] {
  return fragmentsOf(payload).map(({ body, last }) => {
    const head = new Uint8Array(HEADER_BYTES);
    header(kind, last, tag, head);
    return { head, body };
  });
}

export function decodeFrame(bytes: Uint8Array): Frame {
  if (bytes.byteLength < HEADER_BYTES) {
    throw new Error(`frame of ${bytes.byteLength} bytes is shorter than its ${HEADER_BYTES}-byte header`);
  }
  const v = new DataView(bytes.buffer, bytes.byteOffset, HEADER_BYTES);
  const kind = v.getUint8(0);
  if (kind > FrameKind.Goodbye) throw new Error(`unknown frame kind ${kind}`);
  return {
    kind: kind as FrameKind,
    last: (v.getUint8(1) & LAST_FRAGMENT) !== 0,
    id: v.getUint32(4, true),
    step: v.getUint32(8, true),
    chunk: v.getUint32(12, true),
    payload: bytes.subarray(HEADER_BYTES),
  };
}

/**
 * Glues data fragments from one link back into messages. Control frames
 * (heartbeat, abort) may sit between fragments; they never reach this.
 */
export class Reassembler {
  private parts: Uint8Array[] = [];
  private bytes = 0;
  private tag: Tag | null = null;

  /** `recycle` takes each fragment back once it is glued into its message (a link may reuse its buffer). */
  constructor(private readonly recycle: (fragment: Uint8Array) => void = () => {}) {}

  /** Bytes of a message still being glued (they count against the sender's budget). */
  get pendingBytes(): number {
    return this.bytes;
  }

  /** Returns the whole message when `f` was its last fragment, else null. */
  push(f: Frame): { tag: Tag; payload: Uint8Array } | null {
    if (this.tag && tagKey(this.tag) !== tagKey(f)) {
      throw new Error(`fragment of ${tagKey(f)} arrived in the middle of ${tagKey(this.tag)}`);
    }
    if (f.last && this.parts.length === 0)
      return { tag: { id: f.id, step: f.step, chunk: f.chunk }, payload: f.payload };
    this.tag ??= { id: f.id, step: f.step, chunk: f.chunk };
    this.parts.push(f.payload);
    this.bytes += f.payload.byteLength;
    if (!f.last) return null;
    const out = new Uint8Array(this.bytes);
    let o = 0;
    for (const p of this.parts) {
      out.set(p, o);
      o += p.byteLength;
      this.recycle(p);
    }
    const tag = this.tag;
    this.parts = [];
    this.bytes = 0;
    this.tag = null;
    return { tag, payload: out };
  }
}
