/**
 * Node and Deno: read every `shaders/*.wgsl` from disk into the registry.
 * Paths are resolved from this file's URL, which works in both runtimes (and
 * under tsx/vitest) without a bundler. The page never imports this file.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { registerShaders } from './shaders.ts';

export const SHADER_DIR_URL = new URL('../../shaders/', import.meta.url);

/** Loads all shader files; returns how many were registered. */
export function loadShadersFromDisk(dirUrl: URL = SHADER_DIR_URL): number {
  const dir = fileURLToPath(dirUrl);
  const record: Record<string, string> = {};
  for (const name of readdirSync(dir)) {
    if (name.endsWith('.wgsl')) record[name] = readFileSync(fileURLToPath(new URL(name, dirUrl)), 'utf8');
  }
  registerShaders(record);
  return Object.keys(record).length;
}
