/**
 * Join: this tab becomes one peer of the job, exactly like a `ringtrain worker`
 * process: init() joins on the signaling server and opens WebRTC channels to
 * every other rank (the browser's own RTCPeerConnection), then the library's
 * data-parallel loop trains with the job's settings on this tab's GPU. Every
 * event goes to the page's bus, so the ring and charts show this tab's
 * allreduces as they happen.
 */
import type { EventBus } from '../../src/core/events.ts';
import { modelSpecFor } from '../../src/distributed/train/train-local.ts';
import { type Dataset, selectExamples } from '../../src/data/dataset.ts';
import { DEFAULT_TEXT_CONTEXT } from '../../src/data/text.ts';
import { trainConfigFromJob } from '../../src/distributed/train/job-config.ts';
import { createModel, type Model } from '../../src/engine/index.ts';
import { FINISHED, init } from '../../src/distributed/session/session.ts';
import { trainAsPeer } from '../../src/distributed/train/peer.ts';
import { prepareTraining, type PreparedTraining } from '../../src/distributed/train/warm-up.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { loadMnistInPage } from '../mnist-data.ts';
import { loadWordsInPage } from '../words-data.ts';
import { loadJobTableInPage, loadJobTextInPage } from '../job-data.ts';
import { lossText } from './job.ts';
import type { JoinFn } from './participate.ts';

/** A job's evalLimit keeps the first examples of validation only (quick runs). */
function limitEvaluation(validation: Dataset, evalLimit: number | undefined): Dataset {
  const n = evalLimit !== undefined && evalLimit < validation.count ? evalLimit : validation.count;
  return n === validation.count
    ? validation
    : selectExamples(
        validation,
        Uint32Array.from({ length: n }, (_, i) => i),
      );
}

/** The words' training and validation sets. */
async function wordsForJob(evalLimit: number | undefined): Promise<{ train: Dataset; test: Dataset }> {
  const { train, validation } = await loadWordsInPage();
  return { train, test: limitEvaluation(validation, evalLimit) };
}

/**
 * `showModel` gets a copy of the job's model after each epoch and at the end, on
 * whatever rank this tab is (every rank holds the same weights), for the predictions panel.
 */
export function browserJoin(
  gpu: Gpu,
  params: { job: string; token: string },
  bus: EventBus,
  showModel: (model: Model, test: Dataset) => void = () => undefined,
  server = globalThis.location.origin,
): JoinFn {
  return async (progress) => {
    let train!: Dataset;
    let test!: Dataset;
    // The model this tab trains, made (its kernels compiled) before the ring; the trainer takes it over.
    let prepared: PreparedTraining | undefined;
    progress('joining the job…');
    const session = await init({
      server,
      job: params.job,
      token: params.token,
      // Names are unique within a job (a report or a log line must mean one peer): a short random tag tells tabs apart.
      name: `browser tab ${tabTag()}`,
      runtime: 'browser',
      events: bus,
      capabilities: {
        webgpu: true,
        adapter: gpu.info.description.slice(0, 256),
        fallbackAdapter: gpu.info.isFallbackAdapter,
        webrtc: true,
      },
      // The job's model says which data: loaded before the ring forms, so the others never wait on our download.
      beforeRing: async (job, settings) => {
        const d = settings.data;
        if (d.tableSha256) {
          // A table job: the table (and a labels file) come from the server that serves this page, checked against the
          // job's hashes.
          progress(`loading the table ${d.table ?? ''}…`);
          const file = { job: job.id, token: params.token };
          const split = await loadJobTableInPage(
            {
              ...file,
              name: d.table ?? '',
              sha256: d.tableSha256,
              labelColumn: d.labelColumn,
              labels: d.labelsSha256 ? { ...file, name: d.labels ?? '', sha256: d.labelsSha256 } : undefined,
            },
            server,
          );
          train = split.train;
          test = limitEvaluation(split.test, d.evalLimit);
        } else if (d.textSha256) {
          // A text job: the text comes from the server that serves this page, checked against the job's hash.
          progress(`loading the text ${d.text ?? ''}…`);
          const split = await loadJobTextInPage(
            {
              job: job.id,
              token: params.token,
              name: d.text ?? '',
              sha256: d.textSha256,
              context: d.context ?? DEFAULT_TEXT_CONTEXT,
              tokenizer: d.tokenizer,
            },
            server,
          );
          train = split.train;
          test = limitEvaluation(split.validation, d.evalLimit);
        } else {
          const words = job.config.model === 'transformer';
          progress(words ? 'loading the words…' : 'loading the digits…');
          ({ train, test } = words ? await wordsForJob(d.evalLimit) : await loadMnistInPage());
        }
        // A software adapter takes many seconds to compile the first step's kernels: inside the ring the
        // others would wait that long on our first gradient (seen: 30 s on SwiftShader, and the ring gave up).
        if (!job.config.model.startsWith('tfjs')) {
          progress('compiling the model’s kernels…');
          prepared = await prepareTraining(gpu, trainConfigFromJob(job.config, settings), train, test);
        }
        progress('waiting for enough peers…');
      },
    });
    if (session.job.config.model.startsWith('tfjs')) {
      // A TF.js job (ringtrain launch --tabs): this tab runs the job's TF.js program instead of ringtrain's own model.
      progress('loading TensorFlow.js…');
      const { trainTfjsJob } = await import('./tfjs-join.ts');
      // The digits as images (beforeRing loaded them for every MNIST model; this is the cached copy).
      const joined = await trainTfjsJob(session, await loadMnistInPage()).catch(async (err: unknown) => {
        await session.close('error');
        throw err;
      });
      return { rank: session.rank, size: session.size, ...joined };
    }
    let stopRequested = false;
    let copy: Model | null = null;
    const finished = trainAsPeer(session, {
      gpu,
      prepared,
      train,
      test,
      bus,
      shouldStop: () => stopRequested,
      onWeights: ({ params }) => {
        // The panel keeps using the model it was given until the next one arrives: one copy, refreshed.
        if (!copy)
          copy = createModel(gpu, modelSpecFor(trainConfigFromJob(session.job.config, session.settings), train));
        copy.writeParams(params);
        showModel(copy, test);
      },
    }).then(
      async (result) => {
        await session.close(result.stoppedBy ? 'ring broken' : FINISHED);
        // Peers leave as soon as they are done; one that finishes first can break the ring while this
        // rank is still in the last collective. Every step was taken all the same: say so.
        const steps = session.settings.schedule.steps;
        const complete = steps !== undefined && result.steps >= steps;
        const metric =
          session.job.config.model === 'transformer'
            ? `validation loss ${lossText(result.testLoss)}`
            : `test accuracy ${(result.testAccuracy * 100).toFixed(1)}%`;
        if (!result.stoppedBy) return `Training finished: ${result.steps} steps, ${metric}.`;
        if (complete)
          return `Training finished: ${result.steps} steps (the ring closed during the final evaluation: ${result.stoppedBy.message}).`;
        return `Training stopped at step ${result.steps}: ${result.stoppedBy.message}`;
      },
      async (err: unknown) => {
        await session.close('error');
        throw err;
      },
    );
    return {
      rank: session.rank,
      size: session.size,
      finished,
      async leave() {
        // Leave at once, as closing the tab would. Finishing the step first is no kinder: the others
        // are already inside the next collective, and this rank's last evaluation would not match it.
        // The server tells them who left; they stop with PeerLost naming this rank.
        stopRequested = true;
        await session.close('left the page');
        // The local loop notices the closed ring at its next collective; do not wait on it for long.
        await Promise.race([finished.catch(() => undefined), new Promise((r) => setTimeout(r, 5000))]);
      },
    };
  };
}

/** Four hex digits from the browser's random source. */
function tabTag(): string {
  const [n] = crypto.getRandomValues(new Uint16Array(1));
  return n.toString(16).padStart(4, '0');
}
