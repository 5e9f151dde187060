/**
 * What signing the checks costs (signed-gather.ts): the step checks' gather of one block per rank
 * (1 + 256 + 128·size floats, the default verified step's), over a ring of memory links in one
 * process, unsigned and signed, `--gathers` times each. Prints one JSON line per ring size with the
 * mean milliseconds per gather (all ranks at once, so it holds every rank's signing and checking:
 * divide by the ring size for one rank's share) and the ratio.
 *
 * Usage: npx tsx bench/signed-checks.ts [--gathers 50] [--sizes 3,8]   (or deno run -A)
 */
import { allgather } from '../src/collectives/allgather.ts';
import { LinkCommunicator } from '../src/comm/communicator.ts';
import { memoryMesh } from '../src/comm/memory-link.ts';
import { newSigningKeys, recordRingKeys, type SigningKeys } from '../src/distributed/session/ring-keys.ts';
import { signedAllgather } from '../src/distributed/session/signed-gather.ts';
import type { Membership } from '../src/signaling/client.ts';
import { opt } from './args.ts';

const gathers = Number(opt('gathers', '50'));
const sizes = opt('sizes', '3,8').split(',').map(Number);

async function ringOf(size: number, signed: boolean): Promise<LinkCommunicator[]> {
  const comms = memoryMesh(size).map((links, rank) => new LinkCommunicator(rank, size, links, { peerTimeoutMs: 0 }));
  if (!signed) return comms;
  const keys = (await Promise.all(comms.map(() => newSigningKeys()))) as SigningKeys[];
  const membership = { peers: keys.map((k, rank) => ({ rank, signingKey: k.publicText })) } as unknown as Membership;
  await Promise.all(comms.map((c, r) => recordRingKeys(c, membership, keys[r])));
  return comms;
}

async function msPerGather(size: number, signed: boolean): Promise<number> {
  const comms = await ringOf(size, signed);
  const block = new Float32Array(1 + 256 + 128 * size).map((_, i) => Math.sin(i));
  const once = (step: number) =>
    Promise.all(
      comms.map((c) =>
        signed
          ? signedAllgather(c, block, { name: 'gradient-sketches', step })
          : allgather(c, block, { name: 'gradient-sketches' }),
      ),
    );
  await once(0); // agreement cached, keys warm
  const t = performance.now();
  for (let i = 1; i <= gathers; i++) await once(i);
  const ms = (performance.now() - t) / gathers;
  await Promise.all(comms.map((c) => c.close()));
  return ms;
}

for (const size of sizes) {
  const unsigned = await msPerGather(size, false);
  const signed = await msPerGather(size, true);
  console.log(
    JSON.stringify({
      bench: 'signed-checks',
      size,
      block_floats: 1 + 256 + 128 * size,
      gathers,
      unsigned_ms: Number(unsigned.toFixed(3)),
      signed_ms: Number(signed.toFixed(3)),
      ratio: Number((signed / unsigned).toFixed(2)),
    }),
  );
}
