/** What a subcommand may need to know about its invocation, and how it reports an exit status without throwing. */
export const commandStatus = {
  /** Set by a subcommand that ends with a status other than 0 (a re-executed child's, say). */
  exitCode: 0,
  /** The arguments the CLI was called with (after the executable and script), for re-executing under another runtime. */
  args: [] as readonly string[],
};
