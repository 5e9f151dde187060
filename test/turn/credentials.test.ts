import { createHmac } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { noPathError, newIceProgress, noteCandidates } from '../../src/comm/ice-diagnosis.ts';
import { iceFromFlags } from '../../src/cli/options/ice-flags.node.ts';
import { startServer, type RunningServer } from '../../server/index.ts';
import type { WelcomeMsg } from '../../src/signaling/protocol.ts';
import { RawPeer, jobSpec } from '../server/helpers.ts';

const SECRET = 'coturn-shared-secret-for-tests';
const servers: RunningServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

describe('TURN credentials in welcome', () => {
  it('gives each peer its own TURN REST credential, and nothing public shows it', async () => {
    const log: string[] = [];
    const server = await startServer({
      staticDir: null,
      jobs: [jobSpec('j', 'tok')],
      ice: {
        stun: ['stun:turn.example.org:3478'],
        turn: ['turn:turn.example.org:3478?transport=udp'],
        turnSecret: SECRET,
        credentialTtlS: 600,
      },
      log: (l) => log.push(l),
    });
    servers.push(server);
    const before = Math.floor(Date.now() / 1000);
    const a = await RawPeer.join(server.wsUrl, 'j', 'tok', 'a');
    const b = await RawPeer.join(server.wsUrl, 'j', 'tok', 'b');
    const welcomes = [a, b].map((p) => p.messages.find((m) => m.type === 'welcome') as WelcomeMsg);
    const creds: string[] = [];
    for (const [i, w] of welcomes.entries()) {
      expect(w.iceServers?.[0]).toEqual({ urls: ['stun:turn.example.org:3478'] });
      const turn = w.iceServers![1];
      expect(turn.urls).toEqual(['turn:turn.example.org:3478?transport=udp']);
      const [expiry, user] = turn.username!.split(':');
      expect(user).toBe([a, b][i].peerId);
      expect(Number(expiry)).toBeGreaterThanOrEqual(before + 600);
      expect(Number(expiry)).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 600);
      // The oracle: coturn's use-auth-secret check, HMAC-SHA1 of the username under the shared secret.
      expect(turn.credential).toBe(createHmac('sha1', SECRET).update(turn.username!).digest('base64'));
      creds.push(turn.credential!);
    }
    expect(creds[0]).not.toBe(creds[1]);
    const api = await fetch(`${server.url}/api/jobs/j`, { headers: { authorization: 'Bearer tok' } });
    const everything = [await api.text(), await server.metricsText(), log.join('\n')].join('\n');
    expect(everything).toContain(a.peerId); // the endpoints did list the peers
    for (const secret of [SECRET, ...creds]) expect(everything).not.toContain(secret);
    expect(everything).not.toMatch(/"(credential|username|iceServers)"/);
    a.ws.close();
    b.ws.close();
  });

  it('hands out no ICE servers when none are configured, and relay-only when asked', async () => {
    const server = await startServer({
      staticDir: null,
      jobs: [
        jobSpec('plain', 'tok'),
        { ...jobSpec('relayed', 'tok'), ice: { turn: ['turn:10.213.100.1:3478'], transportPolicy: 'relay' } },
      ],
      ice: { turnSecret: SECRET, turn: ['turn:other.example.org'] },
    });
    servers.push(server);
    const plain = await RawPeer.join(server.wsUrl, 'plain', 'tok');
    const relayed = await RawPeer.join(server.wsUrl, 'relayed', 'tok');
    const wp = plain.messages[0] as WelcomeMsg;
    const wr = relayed.messages[0] as WelcomeMsg;
    expect(wp.iceServers?.map((s) => s.urls)).toEqual([['turn:other.example.org']]);
    expect(wp.iceTransportPolicy).toBeUndefined();
    expect(wr.iceServers?.map((s) => s.urls)).toEqual([['turn:10.213.100.1:3478']]);
    expect(wr.iceTransportPolicy).toBe('relay');
    plain.ws.close();
    relayed.ws.close();
    const bare = await startServer({ staticDir: null, jobs: [jobSpec('bare', 'tok')] });
    servers.push(bare);
    const p = await RawPeer.join(bare.wsUrl, 'bare', 'tok');
    expect((p.messages[0] as WelcomeMsg).iceServers).toBeUndefined();
    p.ws.close();
  });

  it('refuses ICE settings it cannot serve, naming what to fix', async () => {
    await expect(startServer({ staticDir: null, ice: { turn: ['turn:x.example.org'] } })).rejects.toThrow(
      /--turn-secret-file/,
    );
    await expect(startServer({ staticDir: null, ice: { stun: ['http://x.example.org'] } })).rejects.toThrow(
      /'http:\/\/x.example.org' is not a STUN URL/,
    );
    await expect(
      startServer({ staticDir: null, jobs: [{ ...jobSpec('j', 't'), ice: { turn: ['turn:x.example.org'] } }] }),
    ).rejects.toThrow(/job 'j' lists TURN servers/);
    expect(() => iceFromFlags({ turn: ['turn:x.example.org'] })).toThrow(/--turn needs --turn-secret-file/);
    expect(() => iceFromFlags({ iceTransport: 'relay' })).toThrow(/--ice-transport relay needs a TURN server/);
    expect(() => iceFromFlags({ turn: ['turn:x.example.org'], turnSecretFile: '/nonexistent/secret' })).toThrow(
      /cannot read --turn-secret-file/,
    );
    expect(() => iceFromFlags({ turnTtl: '5' })).toThrow(/--turn-ttl/);
  });
});

describe('no path between peers', () => {
  it('says which candidates each side had and what to configure', () => {
    const p = newIceProgress();
    p.state = 'checking';
    noteCandidates(p.local, {
      type: 'candidate',
      candidate: { candidate: 'candidate:1 1 udp 2122260223 10.213.11.1 33142 typ host generation 0' },
    });
    noteCandidates(p.remote, {
      type: 'offer',
      sdp: 'a=candidate:2 1 udp 41885439 10.213.100.1 50060 typ relay raddr 10.213.12.1 rport 1',
    });
    const noTurn = noPathError(0, 1, p, [], 8000);
    expect(noTurn.code).toBe('ERR_TRANSPORT');
    expect(noTurn.message).toMatch(
      /rank 0 found no network path to rank 1: ICE was still 'checking' after 8000 ms \(candidates: ours host, theirs relay\)/,
    );
    expect(noTurn.message).toContain('--turn turn:HOST:3478 --turn-secret-file');
    const badTurn = noPathError(0, 1, p, [{ urls: 'turn:t.example.org', username: 'u', credential: 'c' }], 8000);
    expect(badTurn.message).toMatch(/gave this peer no relay address.*static-auth-secret/);
    p.local.add('relay');
    expect(noPathError(0, 1, p, [{ urls: ['turn:t.example.org'] }]).message).toMatch(
      /ICE failed.*not even through the TURN relay/,
    );
  });
});
