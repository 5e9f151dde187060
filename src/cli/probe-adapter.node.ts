/**
 * Run as its own process by `--runtime auto` (host.node.ts): asks Node's
 * Dawn, with the same Vulkan driver choice training would make, for an
 * adapter and prints one JSON line (an AdapterDescription). A child process,
 * so that the parent (perhaps about to re-execute under Deno) never loads the
 * native addon, and a driver that hangs or crashes costs only the probe.
 */
import process from 'node:process';
import { nodeGpu } from '../gpu/device.node.ts';
import type { AdapterDescription } from './runtime-choice.ts';

async function probe(): Promise<AdapterDescription> {
  try {
    const gpu = await nodeGpu();
    const adapter = await gpu.requestAdapter();
    if (!adapter) return { found: false, error: 'requestAdapter() returned null' };
    const info = adapter.info as GPUAdapterInfo & { isFallbackAdapter?: boolean };
    const legacy = (adapter as GPUAdapter & { isFallbackAdapter?: boolean }).isFallbackAdapter;
    return {
      found: true,
      description: info?.description || info?.device || '',
      vendor: info?.vendor ?? '',
      architecture: info?.architecture ?? '',
      isFallbackAdapter: Boolean(info?.isFallbackAdapter ?? legacy ?? false),
    };
  } catch (err) {
    return { found: false, error: String(err instanceof Error ? err.message : err).slice(0, 200) };
  }
}

process.stdout.write(JSON.stringify(await probe()) + '\n', () => process.exit(0));
