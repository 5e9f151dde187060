/**
 * The page's entry. For now: this tab's WebGPU adapter, and a button that
 * trains the MLP for a few steps on the MNIST digits with the same training
 * loop as `ringtrain train`, showing step and loss as they happen.
 */
import { EventBus } from '../src/core/events.ts';
import { trainLocal } from '../src/cli/train-loop.ts';
import { acquireGpu, registerShaders, type Gpu } from '../src/gpu/index.ts';
import { loadMnistInPage } from './mnist-data.ts';

registerShaders(import.meta.glob('../shaders/*.wgsl', { query: '?raw', import: 'default', eager: true }) as Record<string, string>);

const byTestId = (id: string) => document.querySelector<HTMLElement>(`[data-testid="${id}"]`)!;
const adapterEl = byTestId('adapter');
const button = byTestId('train-local') as HTMLButtonElement;
const statusEl = byTestId('local-status');
const stepEl = byTestId('local-step');
const lossEl = byTestId('local-loss');

const gpuReady: Promise<Gpu | null> = acquireGpu().then(
  (gpu) => {
    const { description, vendor, architecture, isFallbackAdapter } = gpu.info;
    // Browsers often blank the description for privacy; vendor and architecture remain.
    const name = [vendor, architecture, description === 'unknown adapter' ? '' : description].filter(Boolean).join(' ');
    adapterEl.textContent = `${name || 'WebGPU adapter'}${isFallbackAdapter ? ' (software)' : ''}`;
    adapterEl.dataset.state = 'ready';
    button.disabled = false;
    return gpu;
  },
  (err: Error) => {
    adapterEl.textContent = `No WebGPU: ${err.message}`;
    adapterEl.dataset.state = 'missing';
    return null;
  },
);

/** Steps to train when the button is pressed; `?steps=N` overrides it (tests use a small N). */
const steps = Number(new URLSearchParams(location.search).get('steps') ?? 40);

button.addEventListener('click', async () => {
  const gpu = await gpuReady;
  if (!gpu) return;
  button.disabled = true;
  const losses: number[] = [];
  try {
    statusEl.textContent = 'loading digits…';
    const { train, test } = await loadMnistInPage();
    statusEl.textContent = 'training';
    const bus = new EventBus();
    bus.on((e) => {
      if (e.type !== 'train-step') return;
      losses.push(e.loss);
      stepEl.textContent = String(e.step);
      lossEl.textContent = e.loss.toFixed(4);
      // The whole curve, for whoever wants more than the last value (the browser test does).
      lossEl.dataset.losses = JSON.stringify(losses);
    });
    const config = { model: 'mlp', optimizer: 'sgd', epochs: 1, batch: 64, lr: 0.05, momentum: 0.9, weightDecay: 0, seed: 1, steps } as const;
    const result = await trainLocal({ gpu, train, test, config, bus });
    statusEl.textContent = `done: test accuracy ${(result.testAccuracy * 100).toFixed(1)}%, ${Math.round(result.samplesPerS)} samples/s`;
    statusEl.dataset.state = 'done';
  } catch (err) {
    statusEl.textContent = `failed: ${(err as Error).message}`;
    statusEl.dataset.state = 'failed';
  } finally {
    button.disabled = false;
  }
});
