/**
 * Staged admission end to end on the client side (real server, real Node signaling clients,
 * real links inside scripts/in-netns.sh): two members that voted, a joiner that the server makes
 * a candidate; every end answers its probes with answerProbe (src/distributed/session/admission-probe.ts),
 * over WebRTC, and over TCP when every end listens, and the candidate's first membership
 * names it. A candidate nobody answers gets admit-timeout and the members' membership never moves.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { TcpLinkEndpoint } from '../../src/comm/tcp-link.node.ts';
import { loadWrtc } from '../../src/comm/wrtc.node.ts';
import { answerProbe } from '../../src/distributed/session/admission-probe.ts';
import { connect, type SignalingClient } from '../../src/signaling/client.node.ts';
import type { ProbeMsg } from '../../src/signaling/protocol.ts';
import { jobSpec } from '../server/helpers.ts';
import { requireNetns } from '../support/workers.ts';

describe('admission probes', () => {
  let server: RunningServer | undefined;
  const clients: SignalingClient[] = [];
  const endpoints: TcpLinkEndpoint[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.leave();
    for (const e of endpoints.splice(0)) e.close();
    notices.splice(0);
    await server?.close();
  });

  /** A job of two members that both attested epoch 2 (voters), so the next joiner is a candidate. */
  async function runningJob(admitTimeoutMs: number) {
    const spec = jobSpec('adm', 'tok', 2, 4);
    spec.config.hyperparameters = { ...spec.config.hyperparameters, admitTimeoutMs };
    server = await startServer({ staticDir: null, jobs: [spec] });
    const join = async (name: string) => {
      const c = await connect(server!.url, { job: 'adm', token: 'tok', name });
      clients.push(c);
      return c;
    };
    const a = await join('a');
    const b = await join('b');
    await a.nextMembership((m) => m.epoch === 2);
    a.attest(2);
    b.attest(2);
    await expect.poll(() => server!.jobInfo('adm')!.peers.every((p) => p.voter)).toBe(true);
    return { a, b, join };
  }

  /** Lines the probes said (a TCP link that fell back to WebRTC, a probe that failed). */
  const notices: string[] = [];
  const answer = (client: SignalingClient, tcp?: TcpLinkEndpoint, seen: ProbeMsg[] = []) =>
    client.onProbe((p) => {
      seen.push(p);
      void answerProbe(client, p, { wrtc: loadWrtc(), tcp, deadlineMs: 20_000, onNotice: (l) => notices.push(l) });
    });

  for (const transport of ['webrtc', 'tcp'] as const) {
    it(`admits a joiner that echoes with both neighbours over ${transport}`, async () => {
      requireNetns();
      const { a, b, join } = await runningJob(20_000);
      const tcp = async () => {
        if (transport !== 'tcp') return undefined;
        const e = await TcpLinkEndpoint.listen();
        endpoints.push(e);
        return e;
      };
      answer(a, await tcp());
      answer(b, await tcp());
      const c = await join('c');
      expect(c.candidacy).toEqual({ deadlineMs: 20_000 });
      expect(c.membership).toBeNull();
      // Its probes came before anyone listened: they were kept.
      const probes: ProbeMsg[] = [];
      answer(c, await tcp(), probes);
      const m = await c.waitForReady(20_000);
      expect(m).toMatchObject({ size: 3, rank: 2 });
      expect(c.candidacy).toBeNull();
      expect(probes.map((p) => p.peer.name).sort()).toEqual(['a', 'b']);
      // A probe of native ends carries its own TCP key.
      expect(probes.every((p) => typeof p.linkKey === 'string')).toBe(true);
      expect((await a.nextMembership((x) => x.size === 3)).peers.map((p) => p.name)).toEqual(['a', 'b', 'c']);
      expect(notices).toEqual([]);
    });
  }

  it('drops a joiner that does not echo, and the members never see it', async () => {
    requireNetns();
    const { a, b, join } = await runningJob(1500);
    answer(a);
    answer(b);
    const epoch = a.membership!.epoch;
    const c = await join('c');
    // The joiner answers nothing: its deadline passes, the server says why and closes it.
    const closed = await new Promise<Error | null>((resolve) => c.on('close', resolve));
    expect(closed?.message).toMatch(/admitTimeoutMs/);
    expect(a.membership!.epoch).toBe(epoch);
    expect(server!.jobInfo('adm')!.peers.map((p) => p.name)).toEqual(['a', 'b']);
  });
});
