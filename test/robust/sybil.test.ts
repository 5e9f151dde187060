/**
 * Sybils on real processes (real server, real Deno workers, real WebRTC inside
 * scripts/in-netns.sh): one token holder opens three extra sockets that join
 * a running 2-worker elastic job, answer pings, report an honest worker and
 * attest to each other, and never open a data channel. Only members that
 * proved they train vote (server/jobs.ts), so their reports eject no one;
 * the workers report them once the data channels of the epoch with them
 * never open, the workers' votes eject them, and training goes on to the end.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startServer } from '../../server/index.ts';
import { PROTOCOL_VERSION } from '../../src/signaling/protocol.ts';
import { RawPeer } from '../server/helpers.ts';
import { killStartedWorkers, requireNetns, seen, startDenoWorker, until } from '../support/workers.ts';

afterAll(() => killStartedWorkers());

const STEPS = 40;

/** A socket that joins and does everything but train: pongs, reports, attests, never a signal. */
async function ghost(wsUrl: string, job: { id: string; token: string }, name: string) {
  const g = await RawPeer.join(wsUrl, job.id, job.token, name);
  g.ws.on('message', (data) => {
    const m = JSON.parse(String(data)) as {
      type: string;
      seq?: number;
      epoch?: number;
      peers?: { peerId: string; name?: string }[];
    };
    if (m.type === 'ping') g.sendJson({ type: 'pong', seq: m.seq });
    if (m.type === 'membership') {
      // Vouch for every epoch (the workers never do for one with us in it) and accuse the first worker.
      g.sendJson({ type: 'attest', epoch: m.epoch });
      const victim = m.peers?.find((p) => p.name === 'honest-0');
      if (victim) g.sendJson({ type: 'report', peerId: victim.peerId, reason: 'it sent me garbage (a lie)' });
    }
  });
  return g;
}

describe('sybil sockets in an elastic job', () => {
  it('three ghosts neither eject an honest worker nor stop training; they are reported and dropped', async () => {
    requireNetns();
    const job = {
      id: 'sybil',
      token: 'sybil-token',
      config: {
        model: 'mlp',
        optimizer: 'sgd',
        // A job open to outsiders waits 6 s (not 120) for a member that sends no signal at all.
        hyperparameters: {
          lr: 0.05,
          momentum: 0.9,
          seed: 11,
          steps: STEPS,
          elastic: true,
          connectTimeoutMs: 6000,
          silentPeerMs: 6000,
        },
        batchPerPeer: 32,
        minPeers: 2,
        startPeers: 2,
        maxPeers: 6,
      },
    };
    const server = await startServer({ jobs: [job], staticDir: null, heartbeatMs: 1000 });
    const ghosts: Awaited<ReturnType<typeof ghost>>[] = [];
    try {
      const honest = [0, 1].map((i) => startDenoWorker(server.url, job, ['--name', `honest-${i}`]));
      // The workers have trained together (so they vote) before the ghosts come.
      await until(
        () =>
          server.jobInfo('sybil')!.peers.filter((p) => p.voter).length === 2 &&
          honest.every((w) => w.steps.length >= 2),
        'the workers to train and vote',
        150_000,
        () => seen(honest),
      );
      for (const name of ['ghost-0', 'ghost-1', 'ghost-2']) ghosts.push(await ghost(server.wsUrl, job, name));
      // A second 'honest-0' is refused: names are unique in a job.
      const impostor = await RawPeer.open(server.wsUrl);
      impostor.sendJson({
        type: 'join',
        protocol: PROTOCOL_VERSION,
        job: job.id,
        token: job.token,
        runtime: 'node',
        name: 'honest-0',
      });
      expect((await impostor.error('name-taken')).fatal).toBe(true);
      const codes = await Promise.race([
        Promise.all(honest.map((w) => w.exit)),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`the workers did not finish${seen(honest)}`)), 200_000),
        ),
      ]);
      for (const [i, w] of honest.entries()) {
        expect(codes[i], w.stderr).toBe(0);
        expect(w.result, w.stderr).toMatchObject({ steps: STEPS, size: 2, stopped_by: null });
        // Nobody honest was ejected; every ghost was, as one that never opened a data channel.
        expect(
          w.events.filter(
            (e) => e.event === 'peer-left' && e.reason === 'ejected' && String(e.name).startsWith('honest'),
          ),
        ).toEqual([]);
        const ejected = w.events.filter((e) => e.event === 'peer-left' && e.reason === 'ejected').map((e) => e.name);
        expect(new Set(ejected), w.stderr).toEqual(new Set(['ghost-0', 'ghost-1', 'ghost-2']));
        expect(w.stderr).toMatch(/never opened a data channel/);
      }
      for (const g of ghosts)
        expect((await g.error('ejected')).message).toMatch(/voting peers: never opened a data channel/);
    } finally {
      for (const g of ghosts) g.close();
      await server.close();
    }
  }, 400_000);
});
