import type { Communicator } from '../comm/interface.ts';
import { runCollective } from './controller/collective.ts';
import type { CollectiveOptions } from './codecs/types.ts';

/** Returns once every rank has called barrier: negotiation alone is a full round through the coordinator. */
export async function barrier(
  comm: Communicator,
  opts: Omit<CollectiveOptions, 'shape' | 'segmentBytes'> = {},
): Promise<void> {
  if (comm.error) throw comm.error;
  const request = { name: opts.name ?? 'barrier', dtype: 'none', shape: [] };
  await runCollective(comm, opts, { kind: 'barrier', request, count: 0, bytes: 0 }, async (run) => {
    await run.phase('barrier', async () => {});
  });
}
