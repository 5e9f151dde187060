/**
 * A well-formed public signing key for tests that join a job with raw protocol messages: the server
 * refuses a join without one (server/signing-key.ts). Nothing is signed with it; a test whose peer
 * must sign uses the product's own keys (newSigningKeys).
 */
export const TEST_SIGNING_KEY = 'ed25519:wzFfBL6XvY+5Vc4Jd5EkVejXvmRbiYb6Nv/AN6uNTV4=';
