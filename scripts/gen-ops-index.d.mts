// Types of scripts/gen-ops-index.mjs, for the TypeScript that imports it (bin/ringtrain.js is plain JS).
/** The absolute path of src/nn/ops/index.ts. */
export declare const OPS_INDEX: string;
/** The op folders under src/nn/ops/, sorted. */
export declare function opFolders(): string[];
/** The barrel's text for the folders on disk now. */
export declare function renderOpsIndex(): string;
/** The absolute path of src/optimizers/index.ts. */
export declare const OPTIMIZERS_INDEX: string;
/** The optimizers' barrel's text for the files on disk now. */
export declare function renderOptimizersIndex(): string;
/** The absolute path of src/collectives/algorithms/index.ts. */
export declare const ALGORITHMS_INDEX: string;
/** The allreduce algorithms' barrel's text for the files on disk now. */
export declare function renderAlgorithmsIndex(): string;
/** Writes every barrel where they differ from what the files give; returns the paths written. */
export declare function writeOpsIndex(): string[];
