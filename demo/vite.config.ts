// The page: `vite build demo` writes demo/dist, which `ringtrain server` serves.
// The page imports the library from ../src and the shaders from ../shaders,
// so the dev server may read the whole repository.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  server: { fs: { allow: [repoRoot] } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // The ten MNIST digit files are 2 MB each; they stay separate assets, fetched when needed.
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 2000,
  },
});
