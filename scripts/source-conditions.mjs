// The export condition that resolves `import … from 'ringtrain'` to the repository's
// .ts sources instead of the built dist/ (package.json, "exports"). TypeScript takes it
// from tsconfig's customConditions, vitest from vitest.config.ts; bin/ringtrain.js adds
// it to its own process (this file's resolve hook) and, through the environment, to every
// process it starts: Node reads NODE_OPTIONS, Deno DENO_CONDITIONS.
export const SOURCE_CONDITION = 'ringtrain-source';

/** Adds the condition to `env` (a process's environment), keeping what is there. */
export function withSourceConditions(env) {
  const flag = `--conditions=${SOURCE_CONDITION}`;
  const nodeOptions = env.NODE_OPTIONS ?? '';
  if (!nodeOptions.split(/\s+/).includes(flag)) env.NODE_OPTIONS = `${nodeOptions} ${flag}`.trim();
  const deno = (env.DENO_CONDITIONS ?? '').split(',').filter(Boolean);
  if (!deno.includes(SOURCE_CONDITION)) env.DENO_CONDITIONS = [...deno, SOURCE_CONDITION].join(',');
  return env;
}

/** A Node module-resolution hook (module.register) that adds the condition to this process's own imports. */
export async function resolve(specifier, context, nextResolve) {
  const conditions = context.conditions.includes(SOURCE_CONDITION)
    ? context.conditions
    : [SOURCE_CONDITION, ...context.conditions];
  return nextResolve(specifier, { ...context, conditions });
}
