/**
 * `ringtrain run` between native workers (Deno, as run picks without a GPU; the
 * unit tests and the bench cover Node) links them by TCP (over loopback,
 * inside the test's network namespace), and trains to the same weights as
 * the same run over WebRTC: the layers above the links cannot tell them apart.
 * The two-worker runs train in f16-mixed (lavapipe has shader-f16): every rank
 * reports that precision, and the same skipped steps and loss scale.
 */
import { describe, expect, it } from 'vitest';
import { ringtrain } from '../support/cli.ts';

type PrecisionByRank = { rank: number; precision: string; skipped_steps: number | null; loss_scale: number | null }[];

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
): Promise<{ links_by_rank: LinksByRank; precision_by_rank: PrecisionByRank; ok: boolean; steps: number }> {
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

const F16_MIXED = ['--precision', 'f16-mixed'];

/** The plain TCP run of two workers, which the WebRTC and the TLS runs are compared with: run once for both. */
let twoOverTcp: ReturnType<typeof run> | undefined;
const plainTcpRun = () => (twoOverTcp ??= run(2, 'auto', F16_MIXED));

/** Every rank trained in f16-mixed, skipped the same steps and ends at the same loss scale. */
function expectOneF16Ring(result: { precision_by_rank: PrecisionByRank }): void {
  const [a, b] = result.precision_by_rank;
  expect([a.precision, b.precision]).toEqual(['f16-mixed', 'f16-mixed']);
  expect(a.loss_scale).toBeGreaterThan(0);
  expect([b.skipped_steps, b.loss_scale]).toEqual([a.skipped_steps, a.loss_scale]);
}

function transports(result: { links_by_rank: LinksByRank }): string[] {
  return result.links_by_rank.flatMap((r) => r.links.map((l) => l.transport));
}

describe('ringtrain run over TCP links', () => {
  it('links two native workers by TCP and ends with the weights the same run gets over WebRTC', async () => {
    const tcp = await plainTcpRun();
    const webrtc = await run(2, 'webrtc', F16_MIXED);
    expect(tcp).toMatchObject({ ok: true, steps: 6 });
    expect(transports(tcp)).toEqual(['tcp', 'tcp']);
    expect(transports(webrtc)).toEqual(['webrtc', 'webrtc']);
    const crcs = (x: { links_by_rank: LinksByRank }) => x.links_by_rank.map((r) => r.weights_crc32);
    expect(crcs(tcp)[0]).not.toBeNull();
    expect(crcs(tcp)).toEqual([crcs(tcp)[0], crcs(tcp)[0]]);
    expect(crcs(webrtc)).toEqual(crcs(tcp));
    expect(tcp.links_by_rank.map((r) => r.tcp_refused)).toEqual([0, 0]);
    expectOneF16Ring(tcp);
    expectOneF16Ring(webrtc);
  }, 300_000);

  it('--link-tls encrypts the same links and trains to the same weights', async () => {
    const [tls, tcp] = [await run(2, 'auto', ['--link-tls', ...F16_MIXED]), await plainTcpRun()];
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
