import { defineConfig } from 'vitest/config';
import { SOURCE_CONDITION, withSourceConditions } from './scripts/source-conditions.mjs';
import { LongestFirst } from './test/support/longest-first.ts';
import { LIGHT_FILES } from './test/support/light-files.ts';

// Tests and the processes they start import 'ringtrain' from the sources, not from a build
// (package.json, "exports"): the forks and their children inherit the environment.
withSourceConditions(process.env);

const ALL_TESTS = ['test/**/*.test.ts'];

export default defineConfig({
  resolve: { conditions: [SOURCE_CONDITION] },
  ssr: { resolve: { conditions: [SOURCE_CONDITION], externalConditions: [SOURCE_CONDITION] } },
  test: {
    // Software WebGPU adapters and WebRTC are CPU-bound and this machine has 2 cores.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 120_000,
    hookTimeout: 120_000,
    reporters: ['default'],
    // A clean clone has no vitest cache to order by: start the longest files first (test/durations.json).
    sequence: { sequencer: LongestFirst },
    // Fails a run that leaves a worker's recovery checkpoint in the repository's root.
    globalSetup: ['test/support/repo-root-guard.ts'],
    // The short unit tests run one after another in workers they share; the rest each in a fresh one
    // (test/support/light-files.ts). Each project names its own files: `extends` would add a root `include` to both.
    projects: [
      { extends: true, test: { name: 'isolated', include: ALL_TESTS, exclude: LIGHT_FILES } },
      { extends: true, test: { name: 'shared', include: LIGHT_FILES, isolate: false } },
    ],
  },
});
