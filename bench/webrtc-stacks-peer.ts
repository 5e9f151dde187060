/**
 * One rank of bench/webrtc-stacks.ts (Node or Deno): joins a local ring whose WebRTC links use
 * `--stack wrtc` (@roamhq/wrtc, libwebrtc: what ringtrain ships) or `--stack ndc`
 * (node-datachannel, libdatachannel), measures the allreduce and its links' p2p rates, and rank 0
 * prints one JSON line.
 */
import process from 'node:process';
import { joinRingFromArgs } from '../src/comm/local-ring-peer.node.ts';
import { measureAllreduce } from '../src/collectives/measure.ts';

const { values, rank, comm } = await joinRingFromArgs(
  { bytes: { type: 'string' }, stack: { type: 'string' }, iterations: { type: 'string' } },
  async (flags) => ({ wrtc: flags.stack === 'ndc' ? await dataChannelStack() : undefined }),
);
try {
  const m = await measureAllreduce(comm, { bytes: Number(values.bytes), iterations: Number(values.iterations ?? 3) });
  if (rank === 0) process.stdout.write(JSON.stringify(m) + '\n');
} catch (e) {
  process.stdout.write(JSON.stringify({ rank, error: (e as Error).message }) + '\n');
  process.exitCode = 1;
}
await comm.close();
process.exit();

/**
 * node-datachannel's polyfill: the standard RTCPeerConnection API simple-peer drives, except that its
 * offers and answers are read-only objects, and simple-peer rewrites their `sdp` before setting them.
 */
async function dataChannelStack(): Promise<unknown> {
  const polyfill = (await import('node-datachannel/polyfill')).default;
  class PeerConnection extends polyfill.RTCPeerConnection {
    override async createOffer() {
      const d = await super.createOffer();
      return { type: d.type, sdp: d.sdp };
    }
    override async createAnswer() {
      const d = await super.createAnswer();
      return { type: d.type, sdp: d.sdp };
    }
  }
  return { ...polyfill, RTCPeerConnection: PeerConnection };
}
