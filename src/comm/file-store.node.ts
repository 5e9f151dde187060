import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pollWait, type Store } from './store.ts';

/**
 * gloo's FileStore idea: one file per key in a shared directory, written to a
 * temporary name and renamed, so a reader never sees half a value. Processes
 * on one machine (Node and Deno alike) meet through it.
 */
export class FileStore implements Store {
  private ready: Promise<unknown>;
  constructor(private dir: string) {
    this.ready = mkdir(dir, { recursive: true });
  }

  private path(key: string): string {
    return join(this.dir, encodeURIComponent(key));
  }

  async set(key: string, value: string): Promise<void> {
    await this.ready;
    const tmp = `${this.path(key)}.${Math.random().toString(36).slice(2)}.tmp`;
    await writeFile(tmp, value);
    await rename(tmp, this.path(key));
  }

  async get(key: string): Promise<string | undefined> {
    try {
      return await readFile(this.path(key), 'utf8');
    } catch (e) {
      if ((e as { code?: string }).code === 'ENOENT') return undefined;
      throw e;
    }
  }

  wait(keys: string[], timeoutMs: number): Promise<string[]> {
    return pollWait(this, keys, timeoutMs);
  }
}
