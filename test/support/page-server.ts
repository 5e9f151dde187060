/**
 * Builds the page (demo/) with Vite into a temporary folder and serves it with
 * Vite's preview server on 127.0.0.1, in this process: what a browser test opens.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, preview } from 'vite';

const demoRoot = fileURLToPath(new URL('../../demo', import.meta.url));
const configFile = join(demoRoot, 'vite.config.ts');

export interface ServedPage {
  url: string;
  close(): Promise<void>;
}

export async function buildAndServePage(): Promise<ServedPage> {
  const outDir = mkdtempSync(join(tmpdir(), 'ringtrain-page-'));
  await build({ configFile, root: demoRoot, logLevel: 'warn', build: { outDir, emptyOutDir: true } });
  const server = await preview({
    configFile,
    root: demoRoot,
    logLevel: 'warn',
    build: { outDir },
    preview: { host: '127.0.0.1', port: 0, strictPort: false, open: false },
  });
  const address = server.httpServer.address();
  if (!address || typeof address === 'string')
    throw new Error(`vite preview did not listen on a TCP port (${String(address)})`);
  return {
    url: `http://127.0.0.1:${address.port}/`,
    async close() {
      await server.close();
      rmSync(outDir, { recursive: true, force: true });
    },
  };
}
