/** The shader files on disk (keys as the registry names them), for the coverage checks. */
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export function shaderFiles(): string[] {
  const dir = fileURLToPath(new URL('../../shaders/', import.meta.url));
  return readdirSync(dir)
    .filter((f) => f.endsWith('.wgsl'))
    .map((f) => f.slice(0, -'.wgsl'.length))
    .sort();
}
