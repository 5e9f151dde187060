/**
 * How the page takes the job and token from its address (demo/src/job.ts):
 * the token comes from the fragment (or an older `?token=` link), is removed
 * from the address with history.replaceState, and is kept for this tab only
 * (sessionStorage) so a reload still works. Pure: fake location, history, storage.
 */
import { describe, expect, it } from 'vitest';
import { jobParamsFrom, takeJobParams } from '../../demo/src/job.ts';

function fakes(href: string, stored: Record<string, string> = {}) {
  const u = new URL(href);
  const replaced: string[] = [];
  const storage = { ...stored };
  return {
    loc: { search: u.search, hash: u.hash, pathname: u.pathname },
    history: {
      state: null,
      replaceState: (_s: unknown, _t: string, url?: string | URL | null) => void replaced.push(String(url)),
    },
    storage: { getItem: (k: string) => storage[k] ?? null, setItem: (k: string, v: string) => void (storage[k] = v) },
    replaced,
    stored: storage,
  };
}

describe('the page reads the token from its address, then removes it', () => {
  it('reads #token=, keeps the job in the query, and strips the token', () => {
    const f = fakes('https://h:1/?job=mnist#token=s3cret');
    expect(takeJobParams(f.loc, f.history, f.storage)).toEqual({ job: 'mnist', token: 's3cret' });
    expect(f.replaced).toEqual(['/?job=mnist']);
    expect(f.stored).toEqual({ 'ringtrain-token:mnist': 's3cret' });
  });

  it('accepts the older ?token= and strips it, keeping every other parameter', () => {
    const f = fakes('https://h:1/?job=mnist&token=s3cret&steps=5#teach-title');
    expect(takeJobParams(f.loc, f.history, f.storage)).toEqual({ job: 'mnist', token: 's3cret' });
    expect(f.replaced).toEqual(['/?job=mnist&steps=5#teach-title']);
  });

  it('after a reload (no token in the address) finds it in this tab’s storage, and leaves the address alone', () => {
    const f = fakes('https://h:1/?job=mnist', { 'ringtrain-token:mnist': 's3cret' });
    expect(takeJobParams(f.loc, f.history, f.storage)).toEqual({ job: 'mnist', token: 's3cret' });
    expect(f.replaced).toEqual([]);
    const other = fakes('https://h:1/?job=other', { 'ringtrain-token:mnist': 's3cret' });
    expect(takeJobParams(other.loc, other.history, other.storage)).toEqual({ job: 'other', token: undefined });
  });

  it('the fragment wins over the query, and a bare address has neither', () => {
    expect(jobParamsFrom('?job=a&token=old', '#token=new')).toEqual({ job: 'a', token: 'new' });
    expect(jobParamsFrom('', '')).toEqual({ job: undefined, token: undefined });
  });
});
