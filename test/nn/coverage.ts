/** The shader files on disk (keys as the registry names them), for the coverage checks. */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const SHADER_DIR = fileURLToPath(new URL('../../shaders/', import.meta.url));

function wgslKeys(): string[] {
  return readdirSync(SHADER_DIR)
    .filter((f) => f.endsWith('.wgsl'))
    .map((f) => f.slice(0, -'.wgsl'.length))
    .sort();
}

/** The shaders with entry points: every file but the parts. */
export function shaderFiles(): string[] {
  return wgslKeys().filter((k) => !k.startsWith('_'));
}

/** The parts (`_name.wgsl` and their flavours, `_name.subgroups.wgsl`), which shaders import (src/gpu/shaders.ts). */
export function shaderParts(): string[] {
  return wgslKeys().filter((k) => k.startsWith('_'));
}

/** The parts a shader file imports by name (`// #import _name` lines). */
export function importsOf(key: string): string[] {
  const text = readFileSync(`${SHADER_DIR}${key}.wgsl`, 'utf8');
  return [...text.matchAll(/^\/\/ #import (\S+)[ \t]*$/gm)].map((m) => m[1]!);
}
