/** `--runtime auto`: the choice by adapter, from adapter descriptions given in place of the probe (this machine has no GPU). */
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/core/errors.ts';
import { decideRuntime, runtimeLine } from '../../src/cli/host.node.ts';
import { chooseRuntime, parseAdapterDescription, withRuntime } from '../../src/cli/runtime-choice.ts';

const h100 = {
  found: true,
  description: 'NVIDIA H100 80GB HBM3',
  vendor: 'nvidia',
  architecture: 'hopper',
  isFallbackAdapter: false,
};
const swiftshader = {
  found: true,
  description: 'SwiftShader driver 5.0.0',
  vendor: 'google',
  architecture: 'swiftshader',
  isFallbackAdapter: true,
};

describe('chooseRuntime', () => {
  it('picks Node (Dawn) on a hardware adapter and says why', () => {
    const c = chooseRuntime(h100);
    expect(c.runtime).toBe('node');
    expect(c.why).toMatch(/^hardware adapter nvidia NVIDIA H100 80GB HBM3: Node's Dawn answers GPU waits/);
    // An adapter that does not say it is a fallback counts as hardware.
    expect(chooseRuntime({ found: true, description: 'Apple M3' }).runtime).toBe('node');
  });

  it('picks Deno on a software adapter or when no adapter was found, naming what was seen', () => {
    const soft = chooseRuntime(swiftshader);
    expect(soft.runtime).toBe('deno');
    expect(soft.why).toMatch(/only the software adapter google SwiftShader driver 5\.0\.0/);
    const none = chooseRuntime({ found: false, error: 'no Vulkan driver' });
    expect(none.runtime).toBe('deno');
    expect(none.why).toMatch(/no adapter \(no Vulkan driver\)/);
  });
});

describe('adapter descriptions in place of the probe', () => {
  it('decideRuntime asks the probe for auto (and when no runtime is given), and obeys a named runtime without asking', async () => {
    const probe = async () => h100;
    const auto = await decideRuntime('auto', probe);
    expect(auto).toMatchObject({ runtime: 'node', auto: true });
    expect(runtimeLine(auto)).toMatch(/^ringtrain: runtime node \(auto: hardware adapter /);
    expect(await decideRuntime(undefined, async () => swiftshader)).toMatchObject({ runtime: 'deno', auto: true });
    const named = await decideRuntime('deno', () => Promise.reject(new Error('a named runtime needs no probe')));
    expect(named).toEqual({ runtime: 'deno', why: '--runtime deno', auto: false });
  });

  it('picks Node without probing where Deno is not installed, and says so with the command that adds it', async () => {
    const d = await decideRuntime(
      'auto',
      () => Promise.reject(new Error('without Deno the adapter does not matter')),
      () => false,
    );
    expect(d).toMatchObject({ runtime: 'node', auto: true });
    expect(runtimeLine(d)).toMatch(/^ringtrain: runtime node \(auto: Deno is not installed; npm install deno adds it/);
    // With Deno installed, the adapter decides as before.
    expect(
      await decideRuntime(
        'auto',
        async () => swiftshader,
        () => true,
      ),
    ).toMatchObject({ runtime: 'deno', auto: true });
  });

  it('rejects a description that is not a JSON object, saying what it should look like', () => {
    for (const bad of ['', 'nvidia', '[1]', 'null']) {
      expect(() => parseAdapterDescription(bad)).toThrow(
        expect.objectContaining({
          code: ErrorCode.InvalidArgument,
          message: expect.stringMatching(/^an adapter description must be a JSON object like/),
        }),
      );
    }
    expect(parseAdapterDescription('{"isFallbackAdapter":true}')).toMatchObject({
      found: true,
      isFallbackAdapter: true,
    });
  });

  it('withRuntime swaps auto for the chosen runtime when re-executing, or appends it', () => {
    expect(withRuntime(['train', '--runtime', 'auto', '--json'], 'deno')).toEqual([
      'train',
      '--runtime',
      'deno',
      '--json',
    ]);
    expect(withRuntime(['train', '--runtime=auto'], 'node')).toEqual(['train', '--runtime=node']);
    expect(withRuntime(['worker', '--job', 'j'], 'deno')).toEqual(['worker', '--job', 'j', '--runtime', 'deno']);
  });
});
