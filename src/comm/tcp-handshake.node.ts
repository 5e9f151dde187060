/**
 * How two ends of a TCP link prove to each other that they hold the epoch's
 * link key before either reads a frame. The key is the server's, handed to
 * every native member of one job for one membership epoch; it never crosses
 * the link itself.
 *
 *   dialer → listener  hello   {v, job, epoch, from, to, nonce}
 *   listener → dialer  answer  {nonce, proof}   proof = HMAC(key, "listener" + transcript)
 *   dialer → listener  proof   {proof}          proof = HMAC(key, "dialer" + transcript)
 *
 * A plain TCP link is two such connections, one per direction, each dialled by
 * the end that reads it (stream-link.node.ts): the lower rank's hello says where
 * to dial back (`back`), and the higher rank's connection back says it is one
 * (`reverse`).
 *
 * The transcript binds both nonces, the job, the epoch, both ranks and those two
 * fields, so a
 * proof can be replayed neither on another link nor in another epoch, and the
 * role in front of it keeps one end's proof from serving as the other's. The
 * dialer commits to the link when it sends its proof (it has checked the
 * listener's); the listener commits once it has checked the dialer's.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { LinkIdentity } from './tcp-endpoint.ts';

export const HANDSHAKE_VERSION = 2;
/** Largest handshake message (a job id is at most 128 characters): a stranger cannot make us buffer more. */
export const MAX_HANDSHAKE_BYTES = 1024;
const NONCE_BYTES = 32;

const hex = z
  .string()
  .regex(/^[0-9a-f]+$/)
  .max(128);
export const helloSchema = z.strictObject({
  v: z.literal(HANDSHAKE_VERSION),
  job: z.string().min(1).max(128),
  epoch: z.number().int().min(0),
  from: z.number().int().min(0),
  to: z.number().int().min(0),
  nonce: hex,
  /** The dialler's address: the listener dials back to it for the other direction of a plain TCP link. */
  back: z.string().min(1).max(300).optional(),
  /** This connection is the other direction of a link the listener dialled (it reads it). */
  reverse: z.literal(true).optional(),
});
export const answerSchema = z.strictObject({ nonce: hex, proof: hex });
export const proofSchema = z.strictObject({ proof: hex });
export type Hello = z.infer<typeof helloSchema>;

export function newNonce(): string {
  return randomBytes(NONCE_BYTES).toString('hex');
}

/** What a hello asks for beyond its identity; bound into both proofs. */
export type HelloRole = Pick<Hello, 'back' | 'reverse'>;

function transcript(id: LinkIdentity, role: HelloRole, dialerNonce: string, listenerNonce: string): string {
  return JSON.stringify([
    id.job,
    id.epoch,
    id.from,
    id.to,
    role.back ?? null,
    role.reverse ?? false,
    dialerNonce,
    listenerNonce,
  ]);
}

/** One end's proof of the key: HMAC-SHA256 over its role and the transcript. */
export function proofOf(
  key: Uint8Array,
  role: 'dialer' | 'listener',
  id: LinkIdentity,
  hello: HelloRole,
  dialerNonce: string,
  listenerNonce: string,
): string {
  return createHmac('sha256', key)
    .update(role)
    .update('\n')
    .update(transcript(id, hello, dialerNonce, listenerNonce))
    .digest('hex');
}

/** Whether `claimed` is the proof `expected` (compared in constant time). */
export function proofMatches(claimed: string, expected: string): boolean {
  const a = Buffer.from(claimed, 'hex');
  const b = Buffer.from(expected, 'hex');
  return a.byteLength === b.byteLength && timingSafeEqual(a, b);
}

/** Parses one handshake message (JSON) against `schema`; null when it is not one. */
export function readHandshake<T>(bytes: Uint8Array, schema: z.ZodType<T>): T | null {
  try {
    const parsed = schema.safeParse(JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export function encodeHandshake(message: object): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(message));
}
