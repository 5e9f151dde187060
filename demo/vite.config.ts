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
  // package's own entries by name, as a user would; in the page those are the browser entries.
  // simple-peer: webrtc-link.ts imports the prebuilt browser bundle in a page, but its Node build's
  // import is visible to the bundler too; that build needs Node's `events` (Vite warns that it
  // externalized it). Both name the browser bundle here, so the page holds only the build it runs.
  resolve: {
    alias: [
      { find: 'ringtrain/tfjs', replacement: fileURLToPath(new URL('../src/tfjs/index.ts', import.meta.url)) },
      { find: /^ringtrain$/, replacement: fileURLToPath(new URL('../src/index.ts', import.meta.url)) },
      { find: /^simple-peer$/, replacement: 'simple-peer/simplepeer.min.js' },
    ],
  },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // The ten MNIST digit files are 2 MB each; they stay separate assets, fetched when needed.
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 2000,
  },
});
