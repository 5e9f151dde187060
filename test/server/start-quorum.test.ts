/**
 * A start quorum (`startPeers`): an elastic job waits for all the peers it was
 * launched with before its first step, then keeps going with as few as
 * minPeers. The launcher's `run --elastic` relies on this.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { RawPeer, jobSpec } from './helpers.ts';

describe('signaling server: start quorum', () => {
  let server: RunningServer | undefined;
  const peers: RawPeer[] = [];
  afterEach(async () => {
    for (const p of peers.splice(0)) p.close();
    await server?.close();
  });

  it('is not ready below startPeers before the start, and stays ready down to minPeers after it', async () => {
    const spec = jobSpec('quorum', 'tok', 1, 4);
    server = await startServer({ staticDir: null, jobs: [{ ...spec, config: { ...spec.config, startPeers: 3 } }] });
    const join = async (name: string) => {
      const p = await RawPeer.join(server!.wsUrl, 'quorum', 'tok', name);
      peers.push(p);
      return p;
    };
    const a = await join('a');
    expect(await a.membership(1)).toMatchObject({ size: 1, ready: false, started: false });
    const b = await join('b');
    expect(await a.membership(2)).toMatchObject({ size: 2, ready: false, started: false });
    const c = await join('c');
    expect(await c.membership(3)).toMatchObject({ size: 3, ready: true, started: true });

    c.close();
    b.close();
    expect(await a.membership(5)).toMatchObject({ size: 1, ready: true, started: true });
  });

  it('refuses a startPeers outside minPeers..maxPeers', async () => {
    const spec = jobSpec('bad', 'tok', 2, 3);
    await expect(
      startServer({ staticDir: null, jobs: [{ ...spec, config: { ...spec.config, startPeers: 4 } }] }),
    ).rejects.toThrow(/startPeers/);
  });
});
