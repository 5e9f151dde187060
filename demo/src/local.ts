/**
 * "Train here, alone": the MLP trained for a few steps on this tab's GPU with
 * the same loop as `ringtrain train`. It needs no server, so a newcomer can
 * see WebGPU training work before joining anything. Its train-step events go
 * to the page's bus when there is no job, so the charts draw its curve.
 */
import { EventBus } from '../../src/core/events.ts';
import { modelSpecFor, trainLocal } from '../../src/distributed/train/train-local.ts';
import { flatParamsFor, type TrainingCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import type { Dataset } from '../../src/data/dataset.ts';
import { createModel, type Model } from '../../src/engine/index.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { loadMnistInPage } from '../mnist-data.ts';
import { h } from './dom.ts';

/** Steps to train when the button is pressed; `?steps=N` overrides it (tests use a small N). */
export const DEFAULT_LOCAL_STEPS = 40;

/**
 * `onTrained` gets a copy of the trained model (rebuilt from the run's final
 * checkpoint, since the training loop frees its own) so the page can show
 * its predictions; the previous copy is destroyed when a new one arrives.
 */
export function localTrainPanel(
  gpuReady: Promise<Gpu | null>,
  pageBus: EventBus | null,
  steps: number,
  onTrained: (model: Model, test: Dataset) => void = () => undefined,
): HTMLElement {
  const button = h('button', { type: 'button', 'data-testid': 'train-local', disabled: true }, 'Train locally');
  const status = h('span', { 'data-testid': 'local-status' }, 'idle');
  const stepEl = h('span', { 'data-testid': 'local-step' }, '0');
  const lossEl = h('span', { 'data-testid': 'local-loss' }, '–');
  const element = h(
    'section',
    { class: 'card', 'data-testid': 'local', 'aria-labelledby': 'local-title' },
    h('h2', { id: 'local-title' }, 'Train here, alone'),
    h(
      'p',
      { class: 'intro' },
      `Trains a small MLP on the MNIST digits with this tab’s GPU for ${steps} steps, without any other peer: a quick check that WebGPU training works here.`,
    ),
    h('div', { class: 'controls' }, button),
    h('p', { role: 'status', 'aria-live': 'polite' }, status, ' · step ', stepEl, ' · loss ', lossEl),
  );

  void gpuReady.then((gpu) => {
    button.disabled = !gpu;
    if (!gpu) button.title = 'This browser has no WebGPU adapter (see “Your GPU”).';
  });

  let trained: Model | null = null;
  button.addEventListener('click', async () => {
    const gpu = await gpuReady;
    if (!gpu) return;
    button.disabled = true;
    const losses: number[] = [];
    delete status.dataset.state;
    try {
      status.textContent = 'loading digits…';
      const { train, test } = await loadMnistInPage();
      status.textContent = 'training';
      const bus = new EventBus();
      bus.on((e) => {
        pageBus?.emit(e);
        if (e.type !== 'train-step') return;
        losses.push(e.loss);
        stepEl.textContent = String(e.step);
        lossEl.textContent = e.loss.toFixed(4);
        // The whole curve, for whoever wants more than the last value (the browser test does).
        lossEl.dataset.losses = JSON.stringify(losses);
      });
      const config = {
        model: 'mlp',
        optimizer: 'sgd',
        epochs: 1,
        batch: 64,
        lr: 0.05,
        momentum: 0.9,
        weightDecay: 0,
        seed: 1,
        steps,
      } as const;
      let last: TrainingCheckpoint | null = null;
      const result = await trainLocal({ gpu, train, test, config, bus, onCheckpoint: (c) => void (last = c) });
      if (last) {
        trained?.destroy();
        trained = createModel(gpu, modelSpecFor(config, train));
        trained.writeParams(
          flatParamsFor(
            last,
            { model: config.model, layout: trained.layout, flatLength: trained.flatLength },
            'this run',
          ),
        );
        onTrained(trained, test);
      }
      status.textContent = `done: test accuracy ${(result.testAccuracy * 100).toFixed(1)}%, ${Math.round(result.samplesPerS)} samples/s`;
      status.dataset.state = 'done';
    } catch (err) {
      status.textContent = `failed: ${(err as Error).message}`;
      status.dataset.state = 'failed';
    } finally {
      button.disabled = false;
    }
  });
  return element;
}
