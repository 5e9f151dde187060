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
  // The TF.js example (examples/tfjs-mnist-train.ts, which the page runs for TF.js jobs) imports the
  // package's own entry by name, as a user would; in the page that is the browser entry.
  resolve: { alias: { 'ringtrain/tfjs': fileURLToPath(new URL('../src/tfjs/index.ts', import.meta.url)) } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // The ten MNIST digit files are 2 MB each; they stay separate assets, fetched when needed.
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 2000,
  },
});
