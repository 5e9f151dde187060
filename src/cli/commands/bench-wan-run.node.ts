/**
 * The body of `ringtrain bench wan`, run under Deno inside a private network
 * namespace (bench-wan.node.ts starts it): N peers in this process, each its
 * own model on the WebGPU adapter and its own end of a real WebRTC ring, train
 * the same model once synchronously, once with local SGD (DiLoCo) + int8 and
 * once synchronously with top-k sparsified gradients,
 * on each emulated link. Prints one JSON line.
 *
 * Links: the rate is the kernel's (`tc qdisc tbf` on the namespace's loopback,
 * where all the ring's traffic goes: N × the per-link rate, since all N links
 * of a ring carry the same load at once); the delay is emulated-link.ts (this
 * kernel has no netem). Time-to-accuracy: seconds from the first step until the
 * evaluation after an epoch first reaches the target, which is the synchronous
 * run's final accuracy less `tolerance`.
 *
 * Usage: deno run -A src/cli/commands/bench-wan-run.node.ts '<WanBenchConfig as JSON>'
 */
import { execFileSync } from 'node:child_process';
import process from 'node:process';
import type { Communicator } from '../../comm/communicator.ts';
import type { LinkEmulation } from '../../comm/emulated-link.ts';
import { joinWebRTCRing } from '../../comm/rings.ts';
import { MemoryStore, StoreSignaler } from '../../comm/store.ts';
import { loadWrtc } from '../../comm/wrtc.node.ts';
import { makeImageDataset } from '../../data/dataset.ts';
import { loadMnist } from '../../data/mnist.node.ts';
import { trainDistributed, type DistributedTrainConfig } from '../../distributed/train/trainer.ts';
import { acquireGpu } from '../../gpu/device.ts';
import type { Gpu } from '../../gpu/gpu.ts';

export interface WanLink {
  name: string;
  /** Per-link rate (bits/s) shaped by tbf; absent: unshaped loopback. */
  rateBitsPerS?: number;
  delayMs: number;
}

export interface WanBenchConfig {
  peers: number;
  model: 'cnn' | 'mlp';
  batch: number;
  lr: number;
  /** Epochs of the synchronous run; the DiLoCo run may take up to maxEpochsFactor times as many to reach the target. */
  epochs: number;
  maxEpochsFactor: number;
  trainCount: number;
  testCount: number;
  syncEvery: number;
  outerLr: number;
  outerMomentum: number;
  /** The third run: synchronous, with top-k sparsified gradients (this fraction) and error feedback. */
  topk: number;
  tolerance: number;
  links: WanLink[];
}

interface RunFigures {
  final_accuracy: number;
  /** [seconds since the first step, accuracy] after each epoch. */
  curve: [number, number][];
  seconds_to_target: number | null;
  seconds: number;
  steps: number;
  /** Payload bytes of the training allreduces, all ranks together. */
  bytes_sent: number;
}

function tc(args: string[]): void {
  execFileSync('tc', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Replaces whatever the last run left on loopback; no rate: back to the default queue. */
function applyLink(link: WanLink, peers: number): void {
  try {
    tc(['qdisc', 'del', 'dev', 'lo', 'root']);
  } catch {
    // nothing was there
  }
  if (link.rateBitsPerS === undefined) return;
  // tbf needs a burst of at least one packet: keep loopback's packets small (the WebRTC ones are ~1200 bytes anyway).
  execFileSync('ip', ['link', 'set', 'lo', 'mtu', '1500']);
  const aggregate = Math.round((link.rateBitsPerS * peers) / 1000);
  tc(['qdisc', 'add', 'dev', 'lo', 'root', 'tbf', 'rate', `${aggregate}kbit`, 'burst', '32kb', 'latency', '2s']);
}

async function ring(peers: number, delayMs: number): Promise<Communicator[]> {
  const store = new MemoryStore();
  const emulation: LinkEmulation | undefined = delayMs > 0 ? { delayMs } : undefined;
  return Promise.all(
    Array.from({ length: peers }, async (_, rank) => {
      const signaler = new StoreSignaler(store, rank, peers);
      try {
        return await joinWebRTCRing({
          rank,
          size: peers,
          signaler,
          wrtc: loadWrtc(),
          connectTimeoutMs: 60_000,
          linkEmulation: emulation,
          peerTimeoutMs: 0,
        });
      } finally {
        signaler.close();
      }
    }),
  );
}

type Mode = 'sync' | 'diloco-int8' | 'sync-topk';

/** What each mode changes of the synchronous run: the compressed ones may take up to maxEpochsFactor times the epochs to reach the target. */
function modeSettings(cfg: WanBenchConfig, mode: Mode): Partial<DistributedTrainConfig> {
  if (mode === 'sync') return {};
  const epochs = cfg.epochs * cfg.maxEpochsFactor;
  if (mode === 'sync-topk') return { epochs, compression: `topk:${cfg.topk}` };
  return {
    epochs,
    syncEvery: cfg.syncEvery,
    outerLr: cfg.outerLr,
    outerMomentum: cfg.outerMomentum,
    compression: 'int8',
  };
}

async function trainOnce(
  gpu: Gpu,
  data: Awaited<ReturnType<typeof datasets>>,
  cfg: WanBenchConfig,
  link: WanLink,
  mode: Mode,
  target?: number,
): Promise<RunFigures> {
  const comms = await ring(cfg.peers, link.delayMs);
  const config: DistributedTrainConfig = {
    model: cfg.model,
    optimizer: 'sgd',
    epochs: cfg.epochs,
    batch: cfg.batch,
    lr: cfg.lr,
    momentum: 0.9,
    weightDecay: 0,
    seed: 1,
    timeoutMs: 120_000,
    ...modeSettings(cfg, mode),
  };
  const curve: [number, number][] = [];
  let t0 = 0;
  const reached = new Array(cfg.peers).fill(false);
  const results = await Promise.all(
    comms.map((comm, rank) =>
      trainDistributed({
        gpu,
        comm,
        train: data.train,
        test: data.test,
        config,
        onStep: () => {
          if (t0 === 0) t0 = performance.now();
        },
        onEvaluate: (e) => {
          if (rank === 0) curve.push([(performance.now() - t0) / 1000, e.testAccuracy]);
          // Every rank sees the same averaged accuracy, so every rank stops after the same epoch.
          if (target !== undefined && e.testAccuracy >= target) reached[rank] = true;
        },
        shouldStop: () => reached[rank],
      }),
    ),
  );
  const seconds = (performance.now() - t0) / 1000;
  comms.forEach((c) => c.close());
  const final = results[0].testAccuracy;
  const goal = target ?? final;
  const hit = curve.find(([, a]) => a >= goal);
  return {
    final_accuracy: final,
    curve,
    seconds_to_target: hit ? hit[0] : null,
    seconds,
    steps: results[0].steps,
    bytes_sent: results.reduce((s, r) => s + r.allreduceBytes, 0),
  };
}

async function datasets(cfg: WanBenchConfig) {
  const mnist = await loadMnist();
  const px = 784;
  return {
    train: makeImageDataset({
      images: mnist.train.images.slice(0, cfg.trainCount * px),
      labels: mnist.train.labels.slice(0, cfg.trainCount),
      height: 28,
      width: 28,
      classes: 10,
    }),
    test: makeImageDataset({
      images: mnist.test.images.slice(0, cfg.testCount * px),
      labels: mnist.test.labels.slice(0, cfg.testCount),
      height: 28,
      width: 28,
      classes: 10,
    }),
  };
}

if (import.meta.main) {
  const cfg = JSON.parse(
    process.argv[2] ?? (globalThis as unknown as { Deno: { args: string[] } }).Deno.args[0],
  ) as WanBenchConfig;
  const gpu = await acquireGpu();
  const data = await datasets(cfg);
  const links = [];
  for (const link of cfg.links) {
    applyLink(link, cfg.peers);
    const sync = await trainOnce(gpu, data, cfg, link, 'sync');
    const target = sync.final_accuracy - cfg.tolerance;
    sync.seconds_to_target = sync.curve.find(([, a]) => a >= target)?.[0] ?? null;
    const diloco = await trainOnce(gpu, data, cfg, link, 'diloco-int8', target);
    const topk = await trainOnce(gpu, data, cfg, link, 'sync-topk', target);
    links.push({
      link: link.name,
      rate_mbit: link.rateBitsPerS === undefined ? null : link.rateBitsPerS / 1e6,
      delay_ms: link.delayMs,
      target_accuracy: target,
      sync,
      diloco_int8: diloco,
      speedup_to_target:
        sync.seconds_to_target && diloco.seconds_to_target ? sync.seconds_to_target / diloco.seconds_to_target : null,
      bytes_ratio: diloco.bytes_sent > 0 ? sync.bytes_sent / diloco.bytes_sent : null,
      sync_topk: topk,
      topk_speedup_to_target:
        sync.seconds_to_target && topk.seconds_to_target ? sync.seconds_to_target / topk.seconds_to_target : null,
      topk_bytes_ratio: topk.bytes_sent > 0 ? sync.bytes_sent / topk.bytes_sent : null,
    });
  }
  applyLink({ name: 'reset', delayMs: 0 }, cfg.peers);
  console.log(
    JSON.stringify({
      bench: 'wan',
      runtime: gpu.info.runtime,
      adapter: gpu.info.description,
      peers: cfg.peers,
      model: cfg.model,
      batch_per_peer: cfg.batch,
      lr: cfg.lr,
      sync_every: cfg.syncEvery,
      outer_lr: cfg.outerLr,
      outer_momentum: cfg.outerMomentum,
      topk: cfg.topk,
      train_examples: cfg.trainCount,
      test_examples: cfg.testCount,
      rate_shaping: 'tc tbf on the namespace loopback (N x per-link rate)',
      delay_emulation: 'emulated-link.ts (messages held one way; no netem in this kernel)',
      links,
    }),
  );
  gpu.destroy();
  process.exit(0);
}
