/**
 * `ringtrain bench profile` through bin/ringtrain.js, as a user runs it: the
 * JSON line's structure and sanity (kernels by label, shares adding to 1,
 * workgroups and encode time above 0), not its figures. Kept affordable on
 * the CPU adapters: one timed step, one run per kernel; the transformer under
 * Deno (lavapipe runs it several times faster than SwiftShader) with
 * timestamps, the MLP under Node by replay, so both runtimes and both
 * timing methods are covered.
 */
import { describe, expect, it } from 'vitest';
import { ringtrain } from '../support/cli.ts';

interface KernelJson {
  label: string;
  dispatches: number;
  workgroups: number;
  ms: number;
  share: number;
}

function profileLine(r: { code: number | null; stdout: string; stderr: string }): Record<string, unknown> {
  expect(r.code, r.stderr).toBe(0);
  const lines = r.stdout.trim().split('\n');
  expect(lines.length, `stdout holds only the JSON line:\n${r.stdout}`).toBe(1);
  return JSON.parse(lines[0]);
}

function expectSane(json: Record<string, unknown>, model: string, batch: number, runtime: string): KernelJson[] {
  expect(json).toMatchObject({ bench: 'profile', model, batch, runtime, fallback_adapter: true });
  expect(typeof json.adapter).toBe('string');
  for (const k of ['step_ms', 'encode_cpu_ms', 'kernels_ms', 'planned_gpu_bytes'] as const)
    expect(json[k], k).toBeGreaterThan(0);
  expect(['timestamp', 'replay']).toContain(json.method);
  const kernels = json.kernels as KernelJson[];
  expect(kernels.length).toBeGreaterThan(3);
  for (const k of kernels) {
    // A shader's key, '+subgroups' where its subgroup version ran (a Node adapter offers them), then the entry point.
    expect(k.label).toMatch(/^[a-z0-9_]+(\+subgroups)?:[a-z0-9_]+$/);
    expect(k.dispatches).toBeGreaterThanOrEqual(1);
    expect(k.workgroups).toBeGreaterThanOrEqual(k.dispatches);
    expect(k.ms).toBeGreaterThanOrEqual(0);
  }
  expect(new Set(kernels.map((k) => k.label)).size, 'one row per label').toBe(kernels.length);
  expect(kernels.reduce((a, k) => a + k.share, 0)).toBeCloseTo(1, 2);
  expect(kernels.reduce((a, k) => a + k.ms, 0)).toBeCloseTo(json.kernels_ms as number, 1);
  expect(kernels.reduce((a, k) => a + k.dispatches, 0)).toBe(json.dispatches);
  return kernels;
}

describe('ringtrain bench profile', () => {
  it('profiles the transformer at batch 256 (Deno, timestamps): matmuls, attention and the AdamW update, by label', async () => {
    const r = await ringtrain([
      'bench',
      'profile',
      '--model',
      'transformer',
      '--batch',
      '256',
      '--json',
      '--runtime',
      'deno',
      '--steps',
      '1',
      '--rounds',
      '1',
      '--warmup',
      '0',
    ]);
    const json = profileLine(r);
    const kernels = expectSane(json, 'transformer', 256, 'deno');
    expect(json.optimizer).toBe('adamw'); // the transformer's training recipe
    const labels = kernels.map((k) => k.label);
    expect(labels.some((l) => l.startsWith('matmul'))).toBe(true);
    for (const l of ['attention:forward', 'layernorm:backward_params', 'adamw:main']) expect(labels).toContain(l);
    expect(kernels.find((k) => k.label === 'adamw:main')!.dispatches).toBe(1);
  });

  it('profiles the MLP (Node, replay)', async () => {
    const args = [
      'bench',
      'profile',
      '--model',
      'mlp',
      '--batch',
      '128',
      '--runtime',
      'node',
      '--steps',
      '2',
      '--rounds',
      '1',
      '--warmup',
      '1',
      '--method',
      'replay',
    ];
    const json = profileLine(await ringtrain([...args, '--json']));
    const kernels = expectSane(json, 'mlp', 128, 'node');
    expect(json.method).toBe('replay');
    expect(kernels.map((k) => k.label)).toContain('sgd:main');
    expect(kernels.map((k) => k.label).some((l) => l.startsWith('matmul'))).toBe(true);
  });

  it('refuses a bad --steps before any GPU work', async () => {
    const r = await ringtrain(['bench', 'profile', '--model', 'mlp', '--steps', '0', '--runtime', 'node']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/--steps must be a whole number ≥ 1/);
  });
});
