/**
 * The options for training over slow links, shared by the commands that
 * start a job (`run`): what the ring sends (`--compression`, `--fp16`) and local SGD /
 * DiLoCo (`--sync-every`, `--outer-lr`, `--outer-momentum`). They become job
 * hyperparameters, so every peer, browser tabs included, trains the same way.
 * `--compression`, `--fp16` and `--sync-every` are made from the settings' table
 * (job-setting-options.ts); the outer step's flags stay here, as their defaults
 * hold only with --sync-every (diloco.ts states them).
 */
import { Command, Option } from 'commander';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Compression } from '../../collectives/codecs/types.ts';
import { DEFAULT_OUTER_LR, DEFAULT_OUTER_MOMENTUM, localSgdSettings } from '../../distributed/train/diloco.ts';
import type { Hyperparameters } from '../../job/settings.ts';

export interface WanOptions {
  compression: Compression;
  syncEvery?: number;
  outerLr?: number;
  outerMomentum?: number;
  /** 'rtt': order the ring by measured round trips when it forms. */
  ringOrder?: 'rtt';
}

export function addWanOptions(cmd: Command): Command {
  return cmd
    .option('--outer-lr <x>', `with --sync-every: the outer SGD's learning rate (default ${DEFAULT_OUTER_LR})`)
    .addOption(
      new Option(
        '--ring-order <how>',
        'rank: the ring in rank order (default); rtt: measure round trips when the ring forms and order it so its slowest hop is short',
      ).choices(['rank', 'rtt']),
    )
    .option(
      '--outer-momentum <x>',
      `with --sync-every: the outer SGD's Nesterov momentum (default ${DEFAULT_OUTER_MOMENTUM}; 0 averages plainly)`,
    );
}

/** Validates the raw values (naming the flag); `fp16` is the older `--fp16` switch. */
export function parseWanOptions(raw: Record<string, unknown>): WanOptions {
  const given = raw.compression as Compression | undefined;
  if (raw.fp16 && given !== undefined && given !== 'fp16')
    throw new RingtrainError(ErrorCode.InvalidArgument, `--fp16 and --compression ${given} disagree; give one of them`);
  const compression = given ?? (raw.fp16 ? 'fp16' : 'none');
  const order = raw.ringOrder === 'rtt' ? { ringOrder: 'rtt' as const } : {};
  if (raw.syncEvery === undefined) {
    for (const [key, flag] of [
      ['outerLr', '--outer-lr'],
      ['outerMomentum', '--outer-momentum'],
    ] as const) {
      if (raw[key] !== undefined)
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `${flag} only applies to local SGD; add --sync-every H or drop it.`,
        );
    }
    return { compression, ...order };
  }
  const number = (v: unknown) => (v === undefined ? undefined : Number(v));
  const s = localSgdSettings({
    syncEvery: Number(raw.syncEvery),
    outerLr: number(raw.outerLr),
    outerMomentum: number(raw.outerMomentum),
  });
  return { compression, syncEvery: s.syncEvery, outerLr: s.outerLr, outerMomentum: s.outerMomentum, ...order };
}

/** The job hyperparameters these options set. */
export function wanHyperparameters(o: WanOptions): Hyperparameters {
  const h: Hyperparameters = { compression: o.compression };
  if (o.ringOrder) h.ringOrder = o.ringOrder;
  if (o.syncEvery !== undefined)
    Object.assign(h, { syncEvery: o.syncEvery, outerLr: o.outerLr!, outerMomentum: o.outerMomentum! });
  return h;
}
