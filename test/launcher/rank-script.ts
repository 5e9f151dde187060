/**
 * A user's program as `ringtrain launch` runs it: one line before joining,
 * `await init()` from 'ringtrain' with no arguments (the launcher's
 * environment names the job), and a line on stdout and on stderr that says
 * the rank the ring gave it.
 */
import { init } from 'ringtrain';

console.log('starting');
const session = await init();
console.log(`I hold rank ${session.rank} of ${session.size}`);
console.error(`rank ${session.rank} on stderr`);
await session.close();
