import { parseArgs } from 'node:util';
import type { Communicator } from './communicator.ts';
import { joinLocalRing, type LocalRingOptions } from './local-ring.node.ts';

type ExtraOptions = Record<string, { type: 'string' | 'boolean' }>;
/** A peer script's own flags, as parsed: strings and switches by name. */
export type PeerArgs = Record<string, string | boolean | undefined>;

/**
 * One rank of a local ring started by a launcher script (`bench allreduce`, the bench/ peers):
 * reads the flags every such peer takes (`--dir --rank --size`, `--transport webrtc|tcp|tls`) beside
 * the script's own, and joins. The timeouts are a loaded 2-core machine's: a process starved for
 * seconds must not be taken for a lost peer. `join` adds or overrides ring options from the flags.
 */
export async function joinRingFromArgs(
  extra: ExtraOptions,
  join: (values: PeerArgs) => Partial<LocalRingOptions> | Promise<Partial<LocalRingOptions>> = () => ({}),
): Promise<{ values: PeerArgs; rank: number; comm: Communicator }> {
  const { values } = parseArgs({
    options: {
      dir: { type: 'string' },
      rank: { type: 'string' },
      size: { type: 'string' },
      transport: { type: 'string' },
      ...extra,
    },
  });
  const rank = Number(values.rank);
  const transport = values.transport === 'tcp' || values.transport === 'tls' ? values.transport : 'webrtc';
  const comm = await joinLocalRing({
    dir: String(values.dir),
    rank,
    size: Number(values.size),
    connectTimeoutMs: 60_000,
    peerTimeoutMs: 20_000,
    transport,
    ...(await join(values)),
  });
  return { values, rank, comm };
}
