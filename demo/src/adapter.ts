/**
 * The adapter panel: what GPU this tab would train with, or, when the browser
 * has none, why and what to do. It keeps the acquired Gpu so Join can use it.
 */
import { isRingtrainError } from '../../src/core/errors.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { h } from './dom.ts';

export interface AdapterPanel {
  element: HTMLElement;
  /** Resolves to the Gpu, or null when this browser has no WebGPU adapter. */
  ready: Promise<Gpu | null>;
}

export function adapterPanel(acquire: () => Promise<Gpu> = () => acquireGpu()): AdapterPanel {
  const body = h('div', { class: 'adapter-body', 'aria-live': 'polite' }, 'Looking for a WebGPU adapter…');
  const element = h(
    'section',
    { class: 'card', 'data-testid': 'adapter', 'aria-labelledby': 'adapter-title' },
    h('h2', { id: 'adapter-title' }, 'Your GPU'),
    body,
  );
  const ready = acquire().then(
    (gpu) => {
      const { description, vendor, architecture, isFallbackAdapter } = gpu.info;
      // Browsers often hide the description (privacy); vendor and architecture still name the adapter.
      const name =
        description && description !== 'unknown adapter'
          ? description
          : [vendor, architecture].filter(Boolean).join(' ') || 'unnamed adapter';
      body.replaceChildren(
        h(
          'dl',
          { class: 'facts' },
          h('dt', {}, 'Adapter'),
          h('dd', { 'data-testid': 'adapter-name' }, name),
          h('dt', {}, 'Vendor'),
          h('dd', {}, vendor || '—'),
          h('dt', {}, 'Architecture'),
          h('dd', {}, architecture || '—'),
          h('dt', {}, 'Kind'),
          h('dd', {}, isFallbackAdapter ? 'software (fallback) adapter: works, but slowly' : 'hardware adapter'),
        ),
      );
      element.dataset.state = 'ready';
      return gpu;
    },
    (err: unknown) => {
      const message = err instanceof Error ? err.message : String(err);
      body.replaceChildren(
        h(
          'p',
          { class: 'bad' },
          'This browser offers no WebGPU adapter, so this tab cannot train. You can still watch the job and use the teaching mode below.',
        ),
        h(
          'ul',
          {},
          h(
            'li',
            {},
            'Use a recent Chrome or Edge (113 or later); in Firefox or Safari turn WebGPU on in the settings.',
          ),
          h('li', {}, 'Open the page over https or from localhost: WebGPU needs a secure context.'),
          h('li', {}, 'Check chrome://gpu: a blocklisted GPU driver hides the adapter.'),
        ),
        h('p', { class: 'detail' }, isRingtrainError(err) ? `${err.code}: ${message}` : message),
      );
      element.dataset.state = 'missing';
      return null;
    },
  );
  return { element, ready };
}
