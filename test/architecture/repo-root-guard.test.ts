/**
 * The guard that keeps test runs from leaving recovery checkpoints in the repository's root
 * (test/support/repo-root-guard.ts): vitest runs it around every run, and it names what a run added.
 */
import { describe, expect, it } from 'vitest';
import config from '../../vitest.config.ts';
import { leftBehind } from '../support/repo-root-guard.ts';

describe('the repository-root guard', () => {
  it('is the global setup of every vitest run', () => {
    expect(config.test?.globalSetup).toContain('test/support/repo-root-guard.ts');
  });

  it('names the recovery checkpoints a run added, and only those', () => {
    const before = ['ringtrain-recovery-step2.safetensors'];
    expect(leftBehind(before, before)).toBeNull();
    const message = leftBehind(before, [...before, 'ringtrain-recovery-step7-2.safetensors']);
    expect(message).toContain('left 1 recovery checkpoint(s)');
    expect(message).toContain('ringtrain-recovery-step7-2.safetensors');
    expect(message).not.toContain('step2.safetensors');
  });
});
