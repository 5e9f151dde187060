/**
 * Node and Deno: read every `shaders/*.wgsl` from disk into the registry.
 * The folder is the package's shaders/ (package-root.node.ts), found the same
 * way from the repository's sources and from an install's built code, in both
 * runtimes. The page never imports this file.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { packagePath } from '../core/package-root.node.ts';
import { registerShaders } from './shaders.ts';

export const SHADER_DIR_URL = pathToFileURL(packagePath('shaders') + '/');

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
