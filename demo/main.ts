/**
 * The page's entry: registers the bundled WGSL shaders with the GPU layer (the
 * page cannot read shaders/ from disk like Node and Deno do) and mounts the
 * panels (demo/src/page.ts).
 */
import './src/page.css';
import { registerShaders } from '../src/gpu/index.ts';
import { browserJoin } from './src/join.ts';
import { mountPage } from './src/page.ts';

registerShaders(
  import.meta.glob('../shaders/*.wgsl', { query: '?raw', import: 'default', eager: true }) as Record<string, string>,
);

const root = document.getElementById('app');
if (!root) throw new Error('demo/index.html lost its #app element');
mountPage(root, { makeJoin: browserJoin });
