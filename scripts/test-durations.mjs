// Writes test/durations.json (seconds per test file, rounded) from vitest's cache of the last runs,
// which test/support/longest-first.ts reads to start the longest files first. Run it after a full
// `npm test` when files were added or got much slower or faster.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const cacheDir = 'node_modules/.vite/vitest';
const results = {};
for (const dir of readdirSync(cacheDir)) {
  const { results: entries } = JSON.parse(readFileSync(join(cacheDir, dir, 'results.json'), 'utf8'));
  for (const [key, { duration }] of entries) results[key.replace(/^[^:]*:/, '')] = Math.round(duration / 1000);
}
const sorted = Object.fromEntries(Object.entries(results).sort(([a], [b]) => a.localeCompare(b)));
writeFileSync('test/durations.json', JSON.stringify(sorted, null, 2) + '\n');
console.log(`test/durations.json: ${Object.keys(sorted).length} files`);
