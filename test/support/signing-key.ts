/**
 * A well-formed public signing key for tests that join a job with raw protocol messages: the server
 * refuses a join without one (server/signing-key.ts). Nothing is signed with it; a test whose peer
 * must sign uses the product's own keys (newSigningKeys).
 */
import { PROTOCOL_VERSION } from '../../src/signaling/protocol.ts';

export const TEST_SIGNING_KEY = 'ed25519:wzFfBL6XvY+5Vc4Jd5EkVejXvmRbiYb6Nv/AN6uNTV4=';

/** A raw `join` as a Node client sends it (this protocol version, the test key), with `fields` over it. */
export function joinMessage(fields: { job: string; token: string } & Record<string, unknown>): Record<string, unknown> {
  return { type: 'join', protocol: PROTOCOL_VERSION, runtime: 'node', signingKey: TEST_SIGNING_KEY, ...fields };
}
