/**
 * Loss, test accuracy and steps per second over steps, drawn with uPlot from
 * the train-step and evaluate events on the page's bus. One line per rank for
 * loss would be noise: peers in lockstep report the same step, so each chart
 * shows the mean over the ranks that reported a step.
 */
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { EventBus } from '../../src/core/events.ts';
import { h } from './dom.ts';

const HEIGHT = 160;
/** Keep the charts cheap on a software-rendered page: at most this many points each. */
const MAX_POINTS = 2000;

/** step -> mean of the values seen for that step. */
class PerStep {
  private sums = new Map<number, { sum: number; n: number }>();
  add(step: number, v: number): void {
    const s = this.sums.get(step) ?? { sum: 0, n: 0 };
    s.sum += v;
    s.n += 1;
    this.sums.set(step, s);
    if (this.sums.size > MAX_POINTS) this.sums.delete(Math.min(...this.sums.keys()));
  }
  series(): [number[], number[]] {
    const steps = [...this.sums.keys()].sort((a, b) => a - b);
    return [steps, steps.map((s) => this.sums.get(s)!.sum / this.sums.get(s)!.n)];
  }
  get size(): number {
    return this.sums.size;
  }
}

interface Chart {
  box: HTMLElement;
  data: PerStep;
  plot?: uPlot;
  label: string;
  stroke: string;
}

export interface ChartsOptions {
  /** True when the job is a language model: the evaluation chart then shows validation loss, not accuracy. */
  validationLoss?: () => boolean;
}

export function chartsPanel(bus: EventBus, options: ChartsOptions = {}): HTMLElement {
  const charts: Chart[] = [
    {
      label: 'Loss',
      stroke: '#b35900',
      data: new PerStep(),
      box: h('div', { class: 'chart', 'data-testid': 'chart-loss' }),
    },
    {
      label: 'Test accuracy',
      stroke: '#1b6e3a',
      data: new PerStep(),
      box: h('div', { class: 'chart', 'data-testid': 'chart-accuracy' }),
    },
    {
      label: 'Steps per second',
      stroke: '#1f4e99',
      data: new PerStep(),
      box: h('div', { class: 'chart', 'data-testid': 'chart-speed' }),
    },
  ];
  const [lossChart, accChart, speedChart] = charts;
  const element = h(
    'section',
    { class: 'card', 'data-testid': 'charts', 'aria-labelledby': 'charts-title' },
    h('h2', { id: 'charts-title' }, 'Progress'),
    h('div', { class: 'chart-grid' }, ...charts.map((c) => h('figure', {}, h('figcaption', {}, c.label), c.box))),
  );
  const accCaption = accChart.box.previousElementSibling as HTMLElement;

  const lastByRank = new Map<number, { step: number; t: number }>();
  let pending = false;
  bus.on((e) => {
    if (e.type === 'train-step') {
      lossChart.data.add(e.step, e.loss);
      const prev = lastByRank.get(e.rank);
      if (prev && e.step > prev.step && e.t > prev.t)
        speedChart.data.add(e.step, ((e.step - prev.step) * 1000) / (e.t - prev.t));
      lastByRank.set(e.rank, { step: e.step, t: e.t });
    } else if (e.type === 'evaluate') {
      if (options.validationLoss?.() && e.testLoss !== undefined) {
        if (accChart.label !== 'Validation loss') {
          accChart.label = accCaption.textContent = 'Validation loss';
          accChart.box.dataset.metric = 'validation-loss';
        }
        accChart.data.add(e.step, e.testLoss);
      } else accChart.data.add(e.step, e.testAccuracy * 100);
    } else return;
    if (!pending) {
      pending = true;
      // Batch redraws: events can come many per frame.
      setTimeout(() => {
        pending = false;
        redraw();
      }, 250);
    }
  });

  function redraw(): void {
    for (const c of charts) {
      if (c.data.size === 0) continue;
      const data = c.data.series() as uPlot.AlignedData;
      if (!c.plot) {
        c.box.replaceChildren();
        c.plot = new uPlot(
          {
            width: Math.max(200, c.box.clientWidth || 300),
            height: HEIGHT,
            legend: { show: false },
            scales: { x: { time: false } },
            axes: [{ label: 'step' }, {}],
            series: [{ label: 'step' }, { label: c.label, stroke: c.stroke, width: 2 }],
          },
          data,
          c.box,
        );
      } else c.plot.setData(data);
      c.box.dataset.points = String(c.data.size);
      // The plotted values, for tests and for anyone reading the DOM instead of the canvas.
      c.box.dataset.values = JSON.stringify(data[1]);
    }
  }
  for (const c of charts) c.box.append(h('p', { class: 'empty' }, 'No data yet.'));
  globalThis.addEventListener?.('resize', () => {
    for (const c of charts) c.plot?.setSize({ width: Math.max(200, c.box.clientWidth), height: HEIGHT });
  });
  return element;
}
