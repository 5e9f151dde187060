// Types of scripts/source-conditions.mjs, for the TypeScript that imports it.
export declare const SOURCE_CONDITION: string;
/** Adds the condition to `env` (a process's environment), keeping what is there. */
export declare function withSourceConditions(
  env: Record<string, string | undefined>,
): Record<string, string | undefined>;
