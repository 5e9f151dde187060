/**
 * acquireGpu(): a WebGPU device in whichever runtime we are in.
 *
 * - Browser and Deno: `navigator.gpu`.
 * - Node: the `webgpu` npm package, through `device.node.ts` (dynamic import,
 *   so the page's bundle and Deno never load the native addon).
 *
 * Node and Deno also load `shaders/*.wgsl` from disk here; the page registers
 * its bundled shaders itself (see shaders.ts).
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { detectRuntime, type RuntimeName } from '../core/runtime.ts';
import { Gpu, type GpuOptions } from './gpu.ts';
import { registeredShaderKeys } from './shaders.ts';

export interface AcquireOptions {
  /** Use this GPU object instead of the runtime's (tests inject fakes here). */
  gpu?: GPU | null;
  powerPreference?: GPUPowerPreference;
  /** Skip reading shaders from disk in Node/Deno (they are registered already). */
  skipShaderLoad?: boolean;
  /**
   * Features to enable when the adapter has them (never required: a missing
   * one is simply absent from `gpu.device.features`). 'shader-f16' is always
   * asked for (--precision f16-mixed needs it); the profiler asks for 'timestamp-query'.
   */
  optionalFeatures?: GPUFeatureName[];
  /**
   * false: neither ask for 'subgroups' nor plan the subgroup reductions (`Gpu.subgroups`); the
   * workgroup-memory versions run, as on an adapter without the feature. Default: used where offered.
   */
  subgroups?: boolean;
  /** Plan kernels as if one storage binding held at most this many bytes (clamped to the adapter's limit): see `Gpu.maxBindingBytes`. */
  maxBindingBytes?: number;
  /** Submit in parts or at once (`GpuOptions.stepParts`); default: in parts where the runtime's waits hold the thread. */
  stepParts?: GpuOptions['stepParts'];
}

/** What to install, per runtime, when no adapter is found. */
export const NO_ADAPTER_HELP: Record<RuntimeName, string> = {
  deno: 'Deno has WebGPU built in but found no Vulkan driver: install a GPU driver, or on a machine without a GPU the software driver (Debian/Ubuntu: apt-get install mesa-vulkan-drivers)',
  node: "Node gets WebGPU from the 'webgpu' npm package (Dawn), which needs a Vulkan driver: install a GPU driver, or on a machine without a GPU Debian's chromium package (its SwiftShader driver, /usr/lib/chromium/vk_swiftshader_icd.json, is picked up automatically) and run `npm install webgpu`",
  browser:
    'this browser exposes no WebGPU adapter: use a recent Chrome/Edge (or Firefox/Safari with WebGPU enabled), enable WebGPU (chrome://flags/#enable-unsafe-webgpu), and serve the page over https or localhost',
};

function noAdapter(runtime: RuntimeName, why: string, cause?: unknown): RingtrainError {
  return new RingtrainError(
    ErrorCode.NoAdapter,
    `no WebGPU adapter in ${runtime} (${why}). ${NO_ADAPTER_HELP[runtime]}`,
    { runtime },
    { cause },
  );
}

async function runtimeGpu(runtime: RuntimeName): Promise<GPU | undefined> {
  if (runtime !== 'browser') {
    // Before Vulkan loads: a private XDG_RUNTIME_DIR keeps its window-system probe quiet (runtime-dir.node.ts).
    const dirPath = '../core/runtime-dir.node.ts';
    const dir = (await import(/* @vite-ignore */ dirPath)) as typeof import('../core/runtime-dir.node.ts');
    try {
      dir.ensureRuntimeDir();
    } catch {
      // Deno without --allow-env or --allow-write: the warning is harmless, a refusal here would not be.
    }
  }
  if (runtime === 'node') {
    // A variable specifier keeps bundlers from following it into the page.
    const path = './device.node.ts';
    try {
      const mod = (await import(/* @vite-ignore */ path)) as typeof import('./device.node.ts');
      return await mod.nodeGpu();
    } catch (err) {
      throw noAdapter(runtime, `loading the 'webgpu' package failed: ${String(err)}`, err);
    }
  }
  return (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu;
}

async function loadShaders(runtime: RuntimeName): Promise<void> {
  if (runtime === 'browser') return;
  const path = './shaders.node.ts';
  const mod = (await import(/* @vite-ignore */ path)) as typeof import('./shaders.node.ts');
  mod.loadShadersFromDisk();
}

export async function acquireGpu(options: AcquireOptions = {}): Promise<Gpu> {
  const runtime = detectRuntime();
  const gpu = options.gpu === undefined ? await runtimeGpu(runtime) : options.gpu;
  if (!gpu) throw noAdapter(runtime, 'navigator.gpu is missing');
  let adapter: GPUAdapter | null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: options.powerPreference });
  } catch (err) {
    throw noAdapter(runtime, `requestAdapter() failed: ${String(err)}`, err);
  }
  if (!adapter) throw noAdapter(runtime, 'requestAdapter() returned null');

  // Ask for the adapter's own limits for what big kernels use; defaults are lower.
  const wanted: (keyof GPUSupportedLimits)[] = [
    'maxStorageBufferBindingSize',
    'maxBufferSize',
    'maxComputeWorkgroupStorageSize',
    'maxStorageBuffersPerShaderStage',
  ];
  const requiredLimits: Record<string, number> = {};
  for (const k of wanted) requiredLimits[k] = adapter.limits[k] as number;
  // Enabling a feature costs nothing until a shader uses it; f16-mixed precision needs this one.
  // Subgroups likewise (the reductions' subgroup versions, Gpu.subgroups), unless the caller turned them off.
  const optional = new Set<GPUFeatureName>(['shader-f16', ...(options.optionalFeatures ?? [])]);
  if (options.subgroups !== false) optional.add('subgroups');
  const requiredFeatures = [...optional].filter((f) => adapter!.features?.has(f));
  const device = await adapter.requestDevice({
    requiredLimits,
    ...(requiredFeatures.length > 0 ? { requiredFeatures } : {}),
    label: 'ringtrain',
  });

  const info = adapter.info as GPUAdapterInfo & { isFallbackAdapter?: boolean };
  const legacyFallback = (adapter as GPUAdapter & { isFallbackAdapter?: boolean }).isFallbackAdapter;
  if (!options.skipShaderLoad && registeredShaderKeys().length === 0) await loadShaders(runtime);
  return new Gpu(
    device,
    {
      runtime,
      description: info?.description || info?.device || 'unknown adapter',
      vendor: info?.vendor ?? '',
      architecture: info?.architecture ?? '',
      isFallbackAdapter: Boolean(info?.isFallbackAdapter ?? legacyFallback ?? false),
    },
    { maxBindingBytes: options.maxBindingBytes, subgroups: options.subgroups, stepParts: options.stepParts },
  );
}
