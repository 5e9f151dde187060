/**
 * Ghosts and sybils on real processes (real server, real Deno workers, real WebRTC inside
 * scripts/in-netns.sh): while a 2-worker elastic job trains, three sockets with its token join,
 * answer pings, would vouch for each other and accuse a worker, and never open a data channel;
 * each one the server drops joins again at once. Under staged admission (server/candidates.ts)
 * they stay candidates: no membership names them, so the ring never waits for them, and each is
 * dropped at the job's admitTimeoutMs. The ring trains on through the ghosts' window (bench/ghosts.ts
 * compares its steps with the window before). Each worker's 'admission-probe' events show that it
 * probed each ghost once and reported steps while probes were open: probing never held up the step.
 * A second worker with a taken name is refused.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startServer } from '../../server/index.ts';
import { RawPeer } from '../server/helpers.ts';
import { MAX_OPEN_PROBES } from '../../src/distributed/session/probe-queue.ts';
import { ghostSwarm, probeTally, stepsWithin } from '../support/ghosts.ts';
import { killStartedWorkers, requireNetns, seen, startDenoWorker, until } from '../support/workers.ts';
import { joinMessage } from '../support/signing-key.ts';

afterAll(() => killStartedWorkers());

const WINDOW_MS = 15_000;
/** More than the test's windows take: the workers are stopped when it ends. */
const STEPS = 100_000;

describe('ghost sockets in an elastic job', () => {
  it('three ghosts that rejoin for a window never stop the ring, are never members, and eject no one', async () => {
    requireNetns();
    const job = {
      id: 'sybil',
      token: 'sybil-token',
      config: {
        model: 'mlp',
        optimizer: 'sgd',
        // The ring's own clocks are the defaults (silentPeerMs 120 s): it never meets a ghost to wait for.
        // An evaluation of one example at each epoch's end, so the windows compare steps, not evaluations.
        hyperparameters: {
          lr: 0.05,
          momentum: 0.9,
          seed: 11,
          steps: STEPS,
          elastic: true,
          admitTimeoutMs: 5000,
          evalLimit: 1,
        },
        batchPerPeer: 32,
        minPeers: 2,
        startPeers: 2,
        maxPeers: 6,
      },
    };
    const server = await startServer({ jobs: [job], staticDir: null });
    const swarm = { stop: () => {} };
    try {
      const honest = [0, 1].map((i) => startDenoWorker(server.url, job, ['--name', `honest-${i}`]));
      // The workers have trained together (so they vote, and joiners must prove themselves) before the ghosts come.
      await until(
        () =>
          server.jobInfo('sybil')!.peers.filter((p) => p.voter).length === 2 &&
          honest.every((w) => w.steps.length >= 5),
        'the workers to train and vote',
        150_000,
        () => seen(honest),
      );
      const before = await stepsWithin(honest, WINDOW_MS);
      const ghosts = ghostSwarm(server.wsUrl, job, 3, 'honest-0');
      swarm.stop = ghosts.stop;
      // A second 'honest-0' is refused: names are unique in a job.
      const impostor = await RawPeer.open(server.wsUrl);
      impostor.sendJson(joinMessage({ job: job.id, token: job.token, name: 'honest-0' }));
      expect((await impostor.error('name-taken')).fatal).toBe(true);
      const during = await stepsWithin(honest, WINDOW_MS);
      ghosts.stop();
      const detail = `steps before ${before}, with ghosts ${during}; ghosts ${JSON.stringify(ghosts.tally)}${seen(honest)}`;
      expect(before, detail).toBeGreaterThan(0);
      // The ring trained on through the ghosts' window. How much they slow it is a timing, which
      // bench/ghosts.ts measures against the window before (issue 37's 20% bar), not a test.
      expect(during, detail).toBeGreaterThan(0);
      // The ghosts were candidates only: never in a membership, each dropped at its deadline (and rejoined).
      expect(ghosts.tally.memberships, detail).toBe(0);
      expect(ghosts.tally.refusals['admit-timeout'] ?? 0, detail).toBeGreaterThanOrEqual(3);
      expect(
        server
          .jobInfo('sybil')!
          .peers.map((p) => p.name)
          .sort(),
      ).toEqual(['honest-0', 'honest-1']);
      for (const w of honest) {
        // Probing ran beside the step (structure, not timing): each worker probed the ghosts, each
        // candidate once, never more at once than its queue allows, and reported steps while probes were open.
        const probes = probeTally(w);
        const said = `${detail}\nprobes ${JSON.stringify(probes)}`;
        expect(probes.opened, said).toBeGreaterThan(0);
        expect(new Set(probes.peers).size, said).toBe(probes.peers.length);
        expect(
          probes.peers.every((name) => ghosts.names.has(name)),
          said,
        ).toBe(true);
        expect(probes.mostOpen, said).toBeLessThanOrEqual(MAX_OPEN_PROBES);
        expect(probes.stepsWhileOpen, said).toBeGreaterThan(0);
        expect(w.child.exitCode, w.stderr).toBeNull();
        // Nobody left the ring and it never grew: no peer-left, every step in a ring of two.
        expect(w.events.filter((e) => e.event === 'peer-left')).toEqual([]);
        expect(new Set(w.steps.map((s) => s.size))).toEqual(new Set([2]));
      }
    } finally {
      swarm.stop();
      await server.close();
    }
  }, 300_000);
});
