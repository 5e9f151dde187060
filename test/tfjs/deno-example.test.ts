/**
 * The TF.js example under Deno, as a user runs it: `ringtrain launch -np 2
 * --runtime deno examples/tfjs-mnist.ts --backend webgpu`. Two Deno processes
 * train with TF.js's WebGPU backend (Deno's own WebGPU, lavapipe here) and
 * meet over real WebRTC (@roamhq/wrtc through npm:). A short run: 2 steps on
 * 128 digits; the point is that every part loads and runs under Deno.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { forEachLine } from '../../src/core/lines.node.ts';
import { requireNetns } from '../support/workers.ts';

describe('examples/tfjs-mnist.ts under Deno', () => {
  it(
    '2 Deno ranks train with TF.js WebGPU over WebRTC, and rank 0 reports the model it ends with',
    { timeout: 300_000 },
    async () => {
      requireNetns();
      const args = [
        'launch',
        '-np',
        '2',
        '--runtime',
        'deno',
        'examples/tfjs-mnist.ts',
        '--epochs',
        '1',
        '--batch',
        '32',
        '--train-examples',
        '128',
        '--test-examples',
        '200',
        '--backend',
        'webgpu',
      ];
      const child = spawn(process.execPath, ['bin/ringtrain.js', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      const lines: string[] = [];
      let stderr = '';
      forEachLine(child.stdout!, (line) => lines.push(line));
      child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      expect(code, stderr.slice(-3000)).toBe(0);
      // Only rank 0 prints, and the launcher's prefix says which rank a line is from.
      const epochLine = lines.find((l) => /^\[rank 0\] epoch 1\/1: /.test(l));
      expect(epochLine, lines.join('\n')).toMatch(/loss \d+\.\d{4} accuracy \d\.\d{4} test accuracy \d\.\d{4}$/);
      const summaries = lines
        .filter((l) => /^\[rank 0\] \{/.test(l))
        .map((l) => JSON.parse(l.slice(l.indexOf('{'))) as Record<string, unknown>);
      expect(summaries).toHaveLength(1);
      expect(summaries[0]).toMatchObject({ size: 2, steps: 2, batchPerRank: 32, backend: 'webgpu' });
      const accuracy = summaries[0].testAccuracy as number;
      expect(accuracy >= 0 && accuracy <= 1).toBe(true);
      // The epoch's test accuracy (TrainEventsCallback's evaluation) is the final model's: nothing moved after it.
      expect(epochLine).toContain(`test accuracy ${accuracy.toFixed(4)}`);
    },
  );
});
