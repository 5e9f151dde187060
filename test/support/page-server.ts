/**
 * Builds the page (demo/) with Vite (once for every test file: built-page.ts) and serves it with
 * Vite's preview server on 127.0.0.1, in this process: what a browser test opens.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { preview } from 'vite';
import { builtPage } from './built-page.ts';

const demoRoot = fileURLToPath(new URL('../../demo', import.meta.url));
const configFile = join(demoRoot, 'vite.config.ts');

export interface ServedPage {
  url: string;
  close(): Promise<void>;
}

export async function buildAndServePage(): Promise<ServedPage> {
  const outDir = await builtPage();
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
    },
  };
}
