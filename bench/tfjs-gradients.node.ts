/**
 * Node only: loads tfjs-core's gradient registry, which autodiff
 * (tf.variableGrads, optimizer.minimize) needs and which tfjs-core's bundles
 * leave out (the `@tensorflow/tfjs` union package imports it; we use only
 * tfjs-core). The registry exists only as the unbundled ES modules of
 * `dist/`, whose imports name files without the `.js` extension and folders
 * without `/index.js`; Node's ES module resolver refuses both (and so does
 * Deno's, with no hook to change it). A resolve hook retries exactly those
 * imports, from inside tfjs-core's dist/, with the extension added.
 *
 * The registry, the engine and the kernel registry live on tfjs-core's global
 * namespace, so the gradients these modules register are the ones the
 * bundled tfjs-core (what `import '@tensorflow/tfjs-core'` loads) looks up.
 */
import { register } from 'node:module';

const RESOLVE_HOOK = `
export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (err) {
    if (!specifier.startsWith('.') || !(context.parentURL ?? '').includes('/@tensorflow/tfjs-core/dist/')) throw err;
    for (const tail of ['.js', '/index.js']) {
      try { return await next(specifier + tail, context); } catch {}
    }
    throw err;
  }
}`;

let loaded: Promise<void> | undefined;

/**
 * Registers every gradient of tfjs-core (once per process). `withHook`: Node
 * only; without it (Deno) the import is tried as is, and its error says why.
 */
export function loadTfGradients(withHook: boolean): Promise<void> {
  loaded ??= (async () => {
    if (withHook) register(`data:text/javascript,${encodeURIComponent(RESOLVE_HOOK)}`);
    await import('@tensorflow/tfjs-core/dist/register_all_gradients.js');
  })();
  return loaded;
}
