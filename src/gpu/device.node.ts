/**
 * Node only: WebGPU from the `webgpu` npm package (Dawn). Loaded by
 * `acquireGpu` through a dynamic import, so neither Deno nor the page ever
 * loads the native addon.
 */
import { existsSync, readdirSync } from 'node:fs';

/**
 * Dawn needs a Vulkan driver it accepts. On a machine with no GPU (no
 * /dev/dri/renderD*), Debian's lavapipe is refused by Dawn (it lacks
 * shaderUniform*ArrayDynamicIndexing), but the SwiftShader driver shipped with
 * Debian's chromium works. Vulkan picks its driver from VK_ICD_FILENAMES, read
 * when Dawn creates its instance, so it must be set before `create()`. We
 * never override a value the user set.
 */
export const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

function hasRenderNode(): boolean {
  try {
    return readdirSync('/dev/dri').some((n) => n.startsWith('renderD'));
  } catch {
    return false;
  }
}

export function chooseVulkanDriver(env: Record<string, string | undefined> = process.env): string | undefined {
  if (env.VK_ICD_FILENAMES) return env.VK_ICD_FILENAMES;
  if (!hasRenderNode() && existsSync(SWIFTSHADER_ICD)) {
    env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
    return SWIFTSHADER_ICD;
  }
  return undefined;
}

let cached: GPU | undefined;

/** A navigator.gpu equivalent for Node. */
export async function nodeGpu(): Promise<GPU> {
  if (cached) return cached;
  chooseVulkanDriver();
  const { create, globals } = await import('webgpu');
  // The WebGPU enums/classes (GPUBufferUsage, ...) that browsers and Deno have as globals.
  Object.assign(globalThis, globals);
  // Dawn rounds timestamp queries down to 65.5 µs (a browser's defence against timing attacks) unless
  // told not to; a local process gains nothing from it, and the profiler (profile.ts) needs kernels of a
  // few µs. The toggle touches nothing but timestamp queries, which only the profiler asks for.
  cached = create(['disable-dawn-features=timestamp_quantization']) as GPU;
  return cached;
}
