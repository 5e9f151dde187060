/**
 * `ringtrain run` between native workers (Deno, as run picks without a GPU; the
 * unit tests and the bench cover Node) links them by TCP (over loopback,
 * inside the test's network namespace), and trains to the same weights as
 * the same run over WebRTC: the layers above the links cannot tell them apart.
 */
import { describe, expect, it } from 'vitest';
import { ringtrain } from '../support/cli.ts';

type LinksByRank = {
  rank: number;
  links: { peer: number; transport: string }[];
  tcp_refused: number;
  weights_crc32: number | null;
}[];

async function run(
  np: number,
  transport: 'auto' | 'webrtc',
  extra: string[] = [],
): Promise<{ links_by_rank: LinksByRank; ok: boolean; steps: number }> {
  const r = await ringtrain([
    'run',
    '-np',
    String(np),
    '--model',
    'mlp',
    '--steps',
    '6',
    '--batch',
    '16',
    '--seed',
    '5',
    '--transport',
    transport,
    ...extra,
    '--json',
  ]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!);
}

/** The plain TCP run of two workers, which the WebRTC and the TLS runs are compared with: run once for both. */
let twoOverTcp: ReturnType<typeof run> | undefined;
const plainTcpRun = () => (twoOverTcp ??= run(2, 'auto'));

function transports(result: { links_by_rank: LinksByRank }): string[] {
  return result.links_by_rank.flatMap((r) => r.links.map((l) => l.transport));
}

describe('ringtrain run over TCP links', () => {
  it('links two native workers by TCP and ends with the weights the same run gets over WebRTC', async () => {
    const tcp = await plainTcpRun();
    const webrtc = await run(2, 'webrtc');
    expect(tcp).toMatchObject({ ok: true, steps: 6 });
    expect(transports(tcp)).toEqual(['tcp', 'tcp']);
    expect(transports(webrtc)).toEqual(['webrtc', 'webrtc']);
    const crcs = (x: { links_by_rank: LinksByRank }) => x.links_by_rank.map((r) => r.weights_crc32);
    expect(crcs(tcp)[0]).not.toBeNull();
    expect(crcs(tcp)).toEqual([crcs(tcp)[0], crcs(tcp)[0]]);
    expect(crcs(webrtc)).toEqual(crcs(tcp));
    expect(tcp.links_by_rank.map((r) => r.tcp_refused)).toEqual([0, 0]);
  }, 300_000);

  it('--link-tls encrypts the same links and trains to the same weights', async () => {
    const [tls, tcp] = [await run(2, 'auto', ['--link-tls']), await plainTcpRun()];
    expect(transports(tls)).toEqual(['tls', 'tls']);
    expect(tls.links_by_rank.map((r) => r.weights_crc32)).toEqual(tcp.links_by_rank.map((r) => r.weights_crc32));
  }, 300_000);

  it('links three native workers by TCP, every pair', async () => {
    const tcp = await run(3, 'auto');
    expect(tcp.ok).toBe(true);
    expect(tcp.links_by_rank.map((r) => r.links.map((l) => l.peer))).toEqual([
      [1, 2],
      [0, 2],
      [0, 1],
    ]);
    expect(transports(tcp)).toEqual(Array(6).fill('tcp'));
    const crcs = tcp.links_by_rank.map((r) => r.weights_crc32);
    expect(new Set(crcs).size).toBe(1);
  }, 300_000);
});
