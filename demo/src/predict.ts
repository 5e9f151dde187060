/**
 * Predictions of the model this tab trains: a row of test digits with the
 * model's guess, refreshed as training goes, and a pad to draw a digit on.
 * It shows whichever model it was handed last: one trained alone in this tab,
 * or a job's model rebuilt from a checkpoint this tab holds.
 */
import type { EventBus } from '../../src/core/events.ts';
import type { Dataset } from '../../src/data/dataset.ts';
import { argmax, SIDE, softmax, toMnist } from './digits.ts';
import { h } from './dom.ts';

/** The part of a model the panel uses. */
export interface Predictor {
  /** Logits [batch × classes] for `batch` images of 28×28 floats. */
  predict(x: Float32Array, batch?: number): Promise<Float32Array>;
  readonly classes: number;
  /** The model's kind ('mlp', 'cnn', 'transformer', a model file's name): the page shows a transformer as words. */
  readonly kind?: string;
}

export interface PredictionsPanel {
  element: HTMLElement;
  /** Show this model's predictions from now on (it replaces the one shown before). */
  attach(model: Predictor, test: Dataset): void;
}

const SAMPLES = 12;
/** Refresh the samples at most this often while training (ms). */
const REFRESH_MS = 2000;
const PAD = 196;
const PEN = 14;

function drawDigit(canvas: HTMLCanvasElement, pixels: ArrayLike<number>): void {
  const ctx = canvas.getContext('2d');
  if (!ctx) return;
  const img = ctx.createImageData(SIDE, SIDE);
  for (let i = 0; i < SIDE * SIDE; i++) {
    const v = 255 - Math.round(Math.min(1, Math.max(0, pixels[i])) * 255);
    img.data.set([v, v, v, 255], i * 4);
  }
  ctx.putImageData(img, 0, 0);
}

export function predictionsPanel(bus: EventBus): PredictionsPanel {
  const status = h(
    'p',
    { class: 'intro', 'data-testid': 'predict-status' },
    'Train here to see what a model predicts. In a job, this tab gets the job’s weights after every epoch and at the end, whatever its rank.',
  );
  const grid = h('ol', {
    class: 'samples',
    'data-testid': 'samples',
    'aria-label': 'Test digits and the model’s predictions',
  });
  const pad = h('canvas', {
    width: PAD,
    height: PAD,
    class: 'pad',
    'data-testid': 'draw-pad',
    'aria-label': 'Drawing pad: draw a digit with the mouse, a finger or a pen',
  });
  const clear = h('button', { type: 'button', 'data-testid': 'draw-clear' }, 'Clear');
  const sample = h('button', { type: 'button', 'data-testid': 'draw-sample', disabled: true }, 'Use a test digit');
  const guess = h('output', { class: 'guess', 'data-testid': 'draw-guess', 'aria-live': 'polite' }, '?');
  const bars = h('ol', { class: 'bars', start: 0, 'aria-label': 'How sure the model is, per digit' });
  const element = h(
    'section',
    { class: 'card', 'data-testid': 'predictions', 'aria-labelledby': 'predictions-title' },
    h('h2', { id: 'predictions-title' }, 'What the model sees'),
    status,
    grid,
    h(
      'div',
      { class: 'draw' },
      h('div', {}, pad, h('div', { class: 'controls' }, clear, sample)),
      h('div', {}, h('p', { class: 'intro' }, 'Draw a digit; the model’s guess:'), guess, bars),
    ),
  );

  let model: Predictor | null = null;
  let test: Dataset | null = null;
  let busy = false;
  let last = 0;
  const ctx = pad.getContext('2d', { willReadFrequently: true });

  async function refreshSamples(): Promise<void> {
    if (!model || !test || busy) return;
    busy = true;
    last = Date.now();
    try {
      const n = Math.min(SAMPLES, test.count);
      const px = SIDE * SIDE;
      const picks = Array.from({ length: n }, (_, i) => Math.floor((i * test!.count) / n));
      const x = new Float32Array(n * px);
      picks.forEach((p, i) => x.set(test!.inputs.subarray(p * px, (p + 1) * px), i * px));
      const logits = await model.predict(x, n);
      const k = model.classes;
      grid.replaceChildren(
        ...picks.map((p, i) => {
          const canvas = h('canvas', { width: SIDE, height: SIDE, 'aria-hidden': 'true' });
          drawDigit(canvas, test!.inputs.subarray(p * px, (p + 1) * px));
          const predicted = argmax(logits.subarray(i * k, (i + 1) * k));
          const truth = test!.labels[p];
          return h(
            'li',
            { class: predicted === truth ? 'right' : 'wrong' },
            canvas,
            h('span', {}, `${predicted}${predicted === truth ? ' ✓' : ` ✗ (is ${truth})`}`),
          );
        }),
      );
      const right = picks.filter((p, i) => argmax(logits.subarray(i * k, (i + 1) * k)) === test!.labels[p]).length;
      status.textContent = `The model right now gets ${right} of these ${n} test digits right.`;
    } catch (err) {
      status.textContent = `Predicting failed: ${err instanceof Error ? err.message : String(err)}`;
    } finally {
      busy = false;
    }
  }

  async function predictDrawing(): Promise<void> {
    if (!ctx) return;
    const rgba = ctx.getImageData(0, 0, PAD, PAD).data;
    const ink = new Float32Array(PAD * PAD);
    for (let i = 0; i < ink.length; i++) ink[i] = 1 - rgba[i * 4] / 255;
    const x = toMnist(ink, PAD, PAD);
    if (!x) {
      guess.textContent = '?';
      bars.replaceChildren();
      return;
    }
    if (!model) {
      guess.textContent = '?';
      bars.replaceChildren(h('li', {}, 'Train here or join the training first: the guess needs a model’s weights.'));
      return;
    }
    const probs = softmax(await model.predict(x, 1));
    guess.textContent = String(argmax(probs));
    const top = Math.max(...probs);
    bars.replaceChildren(
      ...probs.map((p, d) =>
        h(
          'li',
          {},
          h('span', { class: 'bar-label' }, String(d)),
          h('span', { class: 'bar', style: `width: ${((p / top) * 100).toFixed(1)}%` }),
          h('span', { class: 'bar-value' }, `${(p * 100).toFixed(0)}%`),
        ),
      ),
    );
  }

  function clearPad(): void {
    if (!ctx) return;
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, PAD, PAD);
    guess.textContent = '?';
    bars.replaceChildren();
  }

  let drawing = false;
  let prev: { x: number; y: number } | null = null;
  const at = (e: PointerEvent) => {
    const r = pad.getBoundingClientRect();
    return { x: ((e.clientX - r.left) * PAD) / r.width, y: ((e.clientY - r.top) * PAD) / r.height };
  };
  pad.addEventListener('pointerdown', (e) => {
    drawing = true;
    prev = at(e);
    pad.setPointerCapture(e.pointerId);
  });
  pad.addEventListener('pointermove', (e) => {
    if (!drawing || !ctx || !prev) return;
    const p = at(e);
    ctx.strokeStyle = '#000';
    ctx.lineWidth = PEN;
    ctx.lineCap = 'round';
    ctx.beginPath();
    ctx.moveTo(prev.x, prev.y);
    ctx.lineTo(p.x, p.y);
    ctx.stroke();
    prev = p;
  });
  const end = () => {
    if (!drawing) return;
    drawing = false;
    prev = null;
    void predictDrawing();
  };
  pad.addEventListener('pointerup', end);
  pad.addEventListener('pointercancel', end);
  clear.addEventListener('click', clearPad);
  sample.addEventListener('click', () => {
    if (!test || !ctx) return;
    // A keyboard-friendly way to try the pad: paint a random test digit onto it.
    const p = Math.floor(Math.random() * test.count);
    const px = SIDE * SIDE;
    const small = h('canvas', { width: SIDE, height: SIDE });
    drawDigit(small, test.inputs.subarray(p * px, (p + 1) * px));
    ctx.imageSmoothingEnabled = true;
    ctx.drawImage(small, 0, 0, PAD, PAD);
    void predictDrawing();
  });
  clearPad();

  bus.on((e) => {
    if (e.type === 'train-step' && model && Date.now() - last > REFRESH_MS) void refreshSamples();
  });

  return {
    element,
    attach(m, t) {
      model = m;
      test = t;
      sample.disabled = false;
      element.dataset.state = 'attached';
      void refreshSamples();
    },
  };
}
