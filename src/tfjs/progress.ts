/**
 * TrainEventsCallback: a TF.js fit() tells ringtrain's event stream what it
 * does, in the same `train-step` and `evaluate` events ringtrain's own
 * trainer emits, so the page's live ring and charts, the timeline and the CLI
 * render a TF.js job like any other. With a Session (init()'s), the job's
 * progress also goes to the signaling server, where the page's job panel and
 * GET /api/jobs read it.
 */
import { Callback, type Logs } from '@tensorflow/tfjs-layers';
import type * as tf from '@tensorflow/tfjs-core';
import { now } from '../core/events.ts';
import type { Progress } from '../signaling/protocol.ts';
import { currentRingSource, resolveRing, type RingSource } from './ring.ts';

/** Progress goes to the server at most this often (ms), like ringtrain's own peers. */
const PROGRESS_EVERY_MS = 500;

export interface TrainEventsOptions {
  comm?: RingSource;
  /** The test accuracy to announce after each epoch (an `evaluate` event), e.g. from model.evaluate. */
  evaluate?: (epoch: number) => Promise<{ accuracy: number; loss?: number }>;
}

interface ProgressSink {
  client: { reportProgress(p: Progress): void };
}

function hasProgressSink(source: RingSource | null): source is RingSource & ProgressSink {
  const client = (source as Partial<ProgressSink> | null)?.client;
  return typeof client?.reportProgress === 'function';
}

async function scalar(v: number | tf.Scalar | undefined): Promise<number> {
  if (v === undefined) return NaN;
  return typeof v === 'number' ? v : (await v.data())[0];
}

export class TrainEventsCallback extends Callback {
  private step = 0;
  private epochNow = 0;
  private lastReport = 0;
  private batchStarted = 0;

  constructor(private readonly o: TrainEventsOptions = {}) {
    super();
  }

  private source(): RingSource | null {
    return this.o.comm ?? currentRingSource();
  }

  private report(p: Progress, force = false): void {
    const source = this.source();
    if (!hasProgressSink(source)) return;
    const t = Date.now();
    if (!force && t - this.lastReport < PROGRESS_EVERY_MS) return;
    this.lastReport = t;
    source.client.reportProgress(p);
  }

  override async onTrainBegin(): Promise<void> {
    this.step = 0;
  }

  override async onEpochBegin(epoch: number): Promise<void> {
    this.epochNow = epoch;
  }

  override async onBatchBegin(): Promise<void> {
    this.batchStarted = now();
  }

  override async onBatchEnd(_batch: number, logs?: Logs): Promise<void> {
    const comm = resolveRing(this.o.comm, 'TrainEventsCallback');
    // fit() disposes the batch's log tensors after the callbacks: read them, do not free them.
    const values = (logs ?? {}) as Record<string, number | tf.Scalar>;
    const loss = await scalar(values.loss);
    const samples = await scalar(values.size);
    const t = now();
    const ms = t - this.batchStarted;
    const samplesPerS = ms > 0 ? ((samples * comm.size) / ms) * 1000 : 0;
    this.step++;
    comm.events.emit({
      type: 'train-step',
      t,
      rank: comm.rank,
      size: comm.size,
      step: this.step,
      epoch: this.epochNow,
      loss,
      samples,
      samplesPerS,
      bytesSent: comm.stats.bytesSent,
    });
    this.report({
      step: this.step,
      epoch: this.epochNow,
      loss: Number.isFinite(loss) ? loss : undefined,
      samplesPerS,
      allreduceBytes: comm.stats.bytesSent,
    });
  }

  override async onEpochEnd(epoch: number): Promise<void> {
    if (!this.o.evaluate) return;
    const comm = resolveRing(this.o.comm, 'TrainEventsCallback');
    const { accuracy, loss } = await this.o.evaluate(epoch);
    comm.events.emit({
      type: 'evaluate',
      t: now(),
      rank: comm.rank,
      step: this.step,
      epoch,
      testAccuracy: accuracy,
      testLoss: loss,
    });
    this.report({ step: this.step, epoch, testAccuracy: accuracy }, true);
  }
}
