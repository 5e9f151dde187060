/**
 * `ringtrain bench allreduce --peers N --bytes SIZE --transport webrtc|tcp|tls|memory [--fp16] [--json]`:
 * one JSON line {peers, bytes, transport, fp16, algbw_MBps, busbw_MBps, p2p_MBps, ratio, ...}
 * (busbw = algbw x 2(N-1)/N, as nccl-tests; p2p measured in the same run between ranks 0 and 1),
 * and for tensors up to 4 MiB the latency: latency_ms ('auto'), latency_ring_ms, latency_rd_ms and
 * latency_hd_ms, latency_two_shot_ms (each algorithm forced), p2p_rtt_ms (the same bytes there and back on one link) and
 * latency_ratio = latency_ms / p2p_rtt_ms.
 * WebRTC peers are separate processes inside a private network namespace.
 */
import { Command, Option } from 'commander';
import { benchAllreduce, benchSweep, parseBytes } from './bench-allreduce.node.ts';
import type { PeerRuntime } from '../../comm/launch.node.ts';
import { printLine } from '../host.node.ts';
import { benchWan } from './bench-wan.node.ts';
import { profileCommand } from './profile.ts';

export function benchCommand(): Command {
  return new Command('bench')
    .description('Measure parts of ringtrain; prints JSON.')
    .addCommand(allreduceBenchCommand())
    .addCommand(wanBenchCommand())
    .addCommand(profileCommand());
}

function allreduceBenchCommand(): Command {
  return new Command('allreduce')
    .description(
      'Allreduce bandwidth and latency over N local peers, with point-to-point bandwidth and round trip of the same transport for comparison.',
    )
    .option('--peers <n>', 'number of peers', '2')
    .option('--bytes <size>', 'tensor size, e.g. 1MiB, 64MiB, 256MiB (float32)', '64MiB')
    .addOption(
      new Option(
        '--transport <kind>',
        'webrtc: one process per peer over real WebRTC; tcp: one process per peer over authenticated TCP links (loopback); tls: the same over TLS (--link-tls); memory: all in this process',
      )
        .choices(['webrtc', 'tcp', 'tls', 'memory'])
        .default('webrtc'),
    )
    .option('--fp16', 'send float32 as float16 on the wire', false)
    .option(
      '--sweep',
      'time the ring, recursive doubling, halving-doubling and two-shot, each forced, from 1 KiB to 4 MiB: small_bytes and medium_bytes are where recursive doubling and then the middle algorithms stop winning',
      false,
    )
    .option('--iterations <k>', 'timed allreduces (default: 5 up to 16 MiB, else 3)')
    .option('--runtimes <list>', 'runtime per WebRTC peer, e.g. node,deno,node')
    .option('--json', 'print only the JSON line (the default output is that line too)', false)
    .action(
      async (o: {
        peers: string;
        bytes: string;
        transport: 'webrtc' | 'tcp' | 'tls' | 'memory';
        fp16: boolean;
        sweep: boolean;
        iterations?: string;
        runtimes?: string;
        json: boolean;
      }) => {
        const run = o.sweep ? benchSweep : benchAllreduce;
        const result = await run({
          peers: Number(o.peers),
          bytes: parseBytes(o.bytes),
          transport: o.transport,
          fp16: o.fp16,
          sweep: o.sweep,
          iterations: o.iterations ? Number(o.iterations) : undefined,
          runtimes: o.runtimes ? (o.runtimes.split(',') as PeerRuntime[]) : undefined,
        });
        await printLine(JSON.stringify(result));
      },
    );
}

function wanBenchCommand(): Command {
  return new Command('wan')
    .description(
      'Synchronous training against local SGD (DiLoCo) + int8 and against top-k gradients (--topk), N peers over real WebRTC, on loopback and on an emulated internet link (rate: tc tbf; delay: a link wrapper, this kernel has no netem): time-to-accuracy and bytes sent.',
    )
    .option('--peers <n>', 'number of peers', '4')
    .addOption(new Option('--model <kind>', 'model').choices(['cnn', 'mlp']).default('cnn'))
    .option('--batch <n>', 'examples per peer per step', '8')
    .option('--lr <x>', 'inner (and synchronous) SGD learning rate, momentum 0.9', '0.05')
    .option(
      '--epochs <n>',
      'epochs of the synchronous run (local SGD may take twice as many to reach its accuracy)',
      '4',
    )
    .option('--train-examples <n>', 'training examples (an epoch; accuracy is measured after each)', '512')
    .option('--test-examples <n>', 'held-out examples evaluated after each epoch', '256')
    .option('--sync-every <H>', 'local SGD: inner steps per outer step', '8')
    .option('--outer-lr <x>', 'local SGD: outer learning rate', '0.7')
    .option(
      '--outer-momentum <x>',
      "local SGD: outer Nesterov momentum (0.9, DiLoCo's value for H in the hundreds, diverged here at H = 8; 0 averages plainly)",
      '0',
    )
    .option('--rate-mbit <x>', 'emulated link rate per link (Mbit/s)', '10')
    .option('--delay-ms <n>', 'emulated one-way delay per link (ms)', '50')
    .option(
      '--topk <R>',
      'the third run: synchronous with top-k gradients, this fraction per peer (error feedback)',
      '0.01',
    )
    .action(async (o: Record<string, string>) => {
      const result = await benchWan({
        topk: Number(o.topk),
        peers: Number(o.peers),
        model: o.model as 'cnn' | 'mlp',
        batch: Number(o.batch),
        lr: Number(o.lr),
        epochs: Number(o.epochs),
        trainExamples: Number(o.trainExamples),
        testExamples: Number(o.testExamples),
        syncEvery: Number(o.syncEvery),
        outerLr: Number(o.outerLr),
        outerMomentum: Number(o.outerMomentum),
        rateMbit: Number(o.rateMbit),
        delayMs: Number(o.delayMs),
      });
      await printLine(JSON.stringify(result));
    });
}
