// npm records in package-lock.json only the optional platform packages its
// registry can show it. The registry this project is built against serves
// only @deno/linux-x64-glibc, so `npm install` leaves the other platforms of
// the `deno` package out of the lock, and `npm ci` then refuses the lock
// ("Missing: @deno/darwin-arm64@ from lock file"). This adds the missing
// entries (no tarball: npm ci skips packages for another os/cpu without
// fetching them). Run it after any `npm install` that rewrites the lock.
import { readFileSync, writeFileSync } from 'node:fs';

const path = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(path, 'utf8'));
const deno = lock.packages['node_modules/deno'];
if (!deno) throw new Error('package-lock.json has no node_modules/deno entry: run npm install first');
const PLATFORMS = {
  'darwin-arm64': { os: 'darwin', cpu: 'arm64' },
  'darwin-x64': { os: 'darwin', cpu: 'x64' },
  'linux-arm64-glibc': { os: 'linux', cpu: 'arm64', libc: 'glibc' },
  'linux-x64-glibc': { os: 'linux', cpu: 'x64', libc: 'glibc' },
  'win32-arm64': { os: 'win32', cpu: 'arm64' },
  'win32-x64': { os: 'win32', cpu: 'x64' },
};
let added = 0;
for (const name of Object.keys(deno.optionalDependencies ?? {})) {
  const key = `node_modules/${name}`;
  if (lock.packages[key]) continue;
  const p = PLATFORMS[name.replace('@deno/', '')];
  if (!p) throw new Error(`unknown Deno platform package ${name}; add it to PLATFORMS`);
  lock.packages[key] = {
    version: deno.optionalDependencies[name],
    cpu: [p.cpu],
    dev: true,
    ...(p.libc ? { libc: [p.libc] } : {}),
    license: 'MIT',
    optional: true,
    os: [p.os],
  };
  added++;
}
const sorted = Object.fromEntries(
  Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : a > b ? 1 : 0)),
);
lock.packages = sorted;
writeFileSync(path, JSON.stringify(lock, null, 2) + '\n');
console.log(`lock-deno-platforms: added ${added} entr${added === 1 ? 'y' : 'ies'}`);
