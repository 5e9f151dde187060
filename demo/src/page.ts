/**
 * Puts the page together: job and progress from the server, this tab's GPU,
 * Join/Leave, the live ring, the charts and the teaching mode. Every panel
 * listens to one EventBus; the library and the job panel emit on it.
 */
import { EventBus } from '../../src/core/events.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { adapterPanel } from './adapter.ts';
import { chartsPanel } from './charts.ts';
import { h } from './dom.ts';
import { jobPanel, takeJobParams, type JobParams } from './job.ts';
import { DEFAULT_LOCAL_STEPS, localTrainPanel } from './local.ts';
import { participatePanel, type JoinFn } from './participate.ts';
import { predictionsPanel } from './predict.ts';
import type { Dataset } from '../../src/data/dataset.ts';
import { liveRingPanel } from './ring/live.ts';
import { wordsPanel } from './words.ts';
import { textPanel } from './text-sample.ts';
import type { Model } from '../../src/engine/model.ts';
import { MNIST_PIXELS } from '../../src/data/mnist.ts';
import { recordTeachingRun } from './teach/record.ts';
import { teachingView } from './teach/view.ts';

export interface PageOptions {
  /** Defaults to the address (`?job=…#token=…`, or `?job=…&token=…`); the token is then removed from it. */
  params?: JobParams;
  /**
   * How this tab joins the job, given its GPU and the page's bus. Null keeps
   * the Join button disabled with `joinUnavailable` as the reason.
   */
  makeJoin?:
    | ((
        gpu: Gpu,
        params: Required<JobParams>,
        bus: EventBus,
        showModel: (model: Model, test: Dataset) => void,
      ) => JoinFn)
    | null;
  joinUnavailable?: string;
  /** Steps of the "train here, alone" panel; the address's `?steps=N` overrides the default. */
  localSteps?: number;
}

export interface MountedPage {
  bus: EventBus;
  gpu: Promise<Gpu | null>;
}

export function mountPage(root: HTMLElement, options: PageOptions = {}): MountedPage {
  const search = globalThis.location?.search ?? '';
  const params = options.params ?? takeJobParams();
  const localSteps = options.localSteps ?? (Number(new URLSearchParams(search).get('steps')) || DEFAULT_LOCAL_STEPS);
  const bus = new EventBus();
  const adapter = adapterPanel();
  const job = jobPanel(params, bus);
  const participate = participatePanel(bus);
  const predictions = predictionsPanel(bus);
  const words = wordsPanel();
  const text = textPanel();
  // A job's model, whatever this tab's rank: digits for a classifier, a continuation for a text's
  // transformer (its data carries the text's vocabulary), sampled words for the words' transformer.
  const showModel = (model: Model, test: Dataset) => {
    if (test.vocabulary !== undefined) text.attach(model, test);
    else if (model.kind === 'transformer') words.attach(model);
    // The predictions panel draws digits: a table's rows are no pictures (the job panel shows its accuracy).
    else if (test.inputSize === MNIST_PIXELS) predictions.attach(model, test);
  };
  // The predictions panel keeps the last model it was shown (a finished job's final weights stay useful).
  participate.onJoined((joined) => job.setSelf(joined?.rank));
  job.onFinished((step) =>
    participate.jobFinished(
      `The job has finished${step !== undefined ? ` at step ${step}` : ''}: there is no ring left to join.`,
    ),
  );

  root.replaceChildren(
    h(
      'header',
      { class: 'page-header' },
      h('h1', {}, 'ringtrain'),
      h(
        'p',
        { class: 'tagline' },
        'One model, many GPUs: browser tabs, Deno and Node peers train together and average their gradients with ring-allreduce over WebRTC.',
      ),
      h(
        'ol',
        { class: 'start-here', 'aria-label': 'How to use this page' },
        h('li', {}, 'Check “Your GPU”: this tab needs WebGPU to train.'),
        h(
          'li',
          {},
          'Press “Join the training” to lend it to the job in the address, then watch the ring and the charts.',
        ),
        h(
          'li',
          {},
          'New to ring-allreduce? ',
          h('a', { href: '#teach-title' }, 'Step through it in the teaching mode'),
          '.',
        ),
      ),
    ),
    h(
      'main',
      { class: 'page-grid' },
      h(
        'div',
        { class: 'col' },
        job.element,
        participate.element,
        adapter.element,
        localTrainPanel(adapter.ready, params.job ? null : bus, localSteps, (model, test) =>
          predictions.attach(model, test),
        ),
      ),
      h(
        'div',
        { class: 'col wide' },
        liveRingPanel(bus, { watchingJob: Boolean(params.job), finished: () => job.latest()?.finished !== undefined }),
        chartsPanel(bus, { validationLoss: () => job.latest()?.config.model === 'transformer' }),
        text.element,
        words.element,
        predictions.element,
      ),
      h('div', { class: 'full' }, teachingView(recordTeachingRun)),
    ),
  );

  void adapter.ready.then((gpu) => {
    if (!params.job || !params.token)
      return participate.enable(null, 'To join, open the link with ?job=…#token=… that the server prints.');
    if (!gpu)
      return participate.enable(null, 'This browser has no WebGPU adapter, so it cannot train (see “Your GPU”).');
    if (!options.makeJoin)
      return participate.enable(
        null,
        options.joinUnavailable ?? 'Joining from the browser is not available in this build.',
      );
    participate.enable(options.makeJoin(gpu, { job: params.job, token: params.token }, bus, showModel));
  });
  return { bus, gpu: adapter.ready };
}
