/**
 * `--runtime auto`: which runtime trains fastest on this machine's adapter.
 * Measured on one NVIDIA H100 (docs/GPU.md): through Dawn (Node's `webgpu`
 * package) a GPU→CPU wait takes ~0.01–0.04 ms and our matmul ran 1.7× faster
 * than through Deno's wgpu, which resolves every wait on an ~11 ms poll. On
 * machines without a GPU, Deno's lavapipe trained our models ~4.5× faster
 * than Dawn's SwiftShader. So: Node on a hardware adapter, Deno otherwise,
 * when Deno is installed (a development dependency of ringtrain, so a user's
 * project has it only if it added it); Node when it is not.
 *
 * Pure (no process, no files): the probe that fills `AdapterDescription`
 * lives in host.node.ts, and tests inject descriptions here.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';

export type ConcreteRuntime = 'node' | 'deno';

/** What Node + Dawn saw when asked for an adapter (or what a test injects). */
export interface AdapterDescription {
  found: boolean;
  description?: string;
  vendor?: string;
  architecture?: string;
  isFallbackAdapter?: boolean;
  /** Why the probe found none (no driver, the probe failed, …). */
  error?: string;
}

export interface RuntimeChoice {
  runtime: ConcreteRuntime;
  /** One phrase for the first line of output. */
  why: string;
}

function name(a: AdapterDescription): string {
  return [a.vendor, a.description || a.architecture].filter(Boolean).join(' ') || 'an unnamed adapter';
}

/** The choice when Deno is not installed: Node, whatever the adapter (so none is probed). */
export const WITHOUT_DENO: RuntimeChoice = {
  runtime: 'node',
  why: 'Deno is not installed; npm install deno adds it, and without a hardware GPU it trains ~4.5× faster than Node',
};

export function chooseRuntime(adapter: AdapterDescription): RuntimeChoice {
  if (adapter.found && adapter.isFallbackAdapter !== true) {
    return {
      runtime: 'node',
      why: `hardware adapter ${name(adapter)}: Node's Dawn answers GPU waits in ~0.01 ms where Deno's wgpu polls every ~11 ms`,
    };
  }
  const seen = adapter.found
    ? `only the software adapter ${name(adapter)}`
    : `no adapter${adapter.error ? ` (${adapter.error})` : ''}`;
  return {
    runtime: 'deno',
    why: `no hardware GPU (WebGPU saw ${seen}): on CPU adapters Deno's lavapipe trains ~4.5× faster than Dawn's SwiftShader`,
  };
}

/** Parses an adapter description (the probe's answer line): JSON with at least `found` or `isFallbackAdapter`. */
export function parseAdapterDescription(text: string, source = 'an adapter description'): AdapterDescription {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    v = null;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${source} must be a JSON object like {"description":"NVIDIA H100","isFallbackAdapter":false}, got ${JSON.stringify(text.slice(0, 80))}`,
    );
  }
  const o = v as Record<string, unknown>;
  const str = (k: string) => (typeof o[k] === 'string' ? (o[k] as string) : undefined);
  return {
    found: typeof o.found === 'boolean' ? o.found : true,
    description: str('description'),
    vendor: str('vendor'),
    architecture: str('architecture'),
    isFallbackAdapter: typeof o.isFallbackAdapter === 'boolean' ? o.isFallbackAdapter : undefined,
    error: str('error'),
  };
}

/** `args` with its --runtime value replaced by `runtime` (or --runtime appended), for re-executing. */
export function withRuntime(args: readonly string[], runtime: ConcreteRuntime): string[] {
  const out: string[] = [];
  let replaced = false;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--runtime' && i + 1 < args.length) {
      out.push('--runtime', runtime);
      i++;
      replaced = true;
    } else if (args[i].startsWith('--runtime=')) {
      out.push(`--runtime=${runtime}`);
      replaced = true;
    } else out.push(args[i]);
  }
  return replaced ? out : [...out, '--runtime', runtime];
}
