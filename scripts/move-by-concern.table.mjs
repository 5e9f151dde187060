/**
 * Where each file of src/distributed, src/collectives and src/cli goes (scripts/move-by-concern.mjs).
 * One entry per file; a file that stays has no entry only in src/collectives/algorithms/.
 */

/** `from/name` → `folder/name` for each name. */
const group = (from, folder, names) => Object.fromEntries(names.map((n) => [`${from}/${n}`, `${folder}/${n}`]));

export const MOVES = {
  // The Horovod-style API a program calls: DistributedOptimizer, broadcasts, elastic State, lr scaling, init() under Node.
  ...group('src/distributed', 'src/distributed/api', [
    'optimizer.ts',
    'broadcast-state.ts',
    'lr.ts',
    'elastic.ts',
    'elastic-run.ts',
  ]),
  // The training loop and the trainers it runs: one peer, a ring, DiLoCo; what they take and give back.
  ...group('src/distributed', 'src/distributed/train', [
    'training-loop.ts',
    'training-state.ts',
    'train-local.ts',
    'trainer.ts',
    'trainer-types.ts',
    'config-types.ts',
    'train-config.ts',
    'ring-peers.ts',
    'diloco.ts',
    'model-fit.ts',
    'resume-check.ts',
    'warm-up.ts',
    'shares.ts',
    'step-clock.ts',
    'peer.ts',
    'job-config.ts',
  ]),
  // What every rank checks about the others: the guard, its rules, the step checks, agreement on state.
  ...group('src/distributed', 'src/distributed/robust', [
    'guard.ts',
    'doubt.ts',
    'direction.ts',
    'step-checks.ts',
    'state-agreement.ts',
  ]),
  // A peer's place in a job: the session on the signaling server, how its ring forms, what it reports.
  ...group('src/distributed', 'src/distributed/session', [
    'session.ts',
    'session.node.ts',
    'session-types.ts',
    'server-link.ts',
    'ring-former.ts',
    'peer-reports.ts',
    'admission-probe.ts',
    'ring-epoch.ts',
    'rtt-ring.ts',
    'elastic-ring.ts',
    'ring-errors.ts',
    'launch-env.ts',
    'launch-env.node.ts',
    'job-address.node.ts',
    'ring-keys.ts', // the ring's signing keys, handed out with the membership
    'signed-gather.ts', // check values gathered signed: beside the keys, as peer-reports.ts reads its proofs
  ]),
  // What a run shows: the Chrome-trace timeline and the stall inspector's lines.
  ...group('src/distributed', 'src/distributed/observe', ['timeline.ts', 'stall.ts']),
  // The GradientReducer (DDP's Reducer) is already a folder of its own concern: it stays.
  ...group('src/distributed/reduce', 'src/distributed/reduce', [
    'accumulator.ts',
    'gradient-check.ts',
    'gradient-reducer.ts',
    'gradient-sum.ts',
    'overlap-plan.ts',
    'overlap.ts',
    'robust-sum.ts',
    'settings.ts',
  ]),

  // collectives/: the operations stay at the top (allreduce, allgather, …, the ring loops, fusion).
  ...group('src/collectives', 'src/collectives', [
    'index.ts',
    'allreduce.ts',
    'allgather.ts',
    'alltoall.ts',
    'barrier.ts',
    'broadcast.ts',
    'reducescatter.ts',
    'fusion.ts',
    'measure.ts',
    'ring-order.ts',
  ]),
  // How a tensor travels: fp16, int8, top-k and the wire format that picks one.
  ...group('src/collectives', 'src/collectives/codecs', [
    'types.ts',
    'partition.ts',
    'reduce.ts',
    'fp16.ts',
    'int8.ts',
    'wire.ts',
  ]),
  // Horovod's controller: negotiation, the response cache, the runner every collective goes through, process sets.
  ...group('src/collectives', 'src/collectives/controller', ['negotiate.ts', 'cache.ts', 'run.ts', 'process-set.ts']),
  // How segments move between ranks, the patterns the algorithms are built from: round the ring, block exchanges, top-k's sparse pairs.
  ...group('src/collectives', 'src/collectives/transfer', ['ring.ts', 'block-exchange.ts', 'topk.ts']),
  // Sums that survive bad ranks: robust aggregation, centered clipping, sketches, the verified allreduce.
  ...group('src/collectives', 'src/collectives/robust', [
    'robust-aggregate.ts',
    'centered-clip.ts',
    'sketch.ts',
    'verified.ts',
  ]),

  // cli/: the program, the process it runs in (these must share a folder: host.node.ts finds main.ts beside it).
  ...group('src/cli', 'src/cli', [
    'main.ts',
    'program.ts',
    'host.node.ts',
    'probe-adapter.node.ts',
    'status.ts',
    'runtime-choice.ts',
    'child-output.node.ts',
    'peak-rss.node.ts',
    'evaluation-failure.ts',
  ]),
  // One file per subcommand, with the parts only it uses.
  ...group('src/cli', 'src/cli/commands', [
    'server.ts',
    'train.ts',
    'run.ts',
    'worker.ts',
    'launch.ts',
    'generate.ts',
    'export.ts',
    'predict.ts',
    'predict-input.ts',
    'k8s.node.ts',
    'simulate.node.ts',
    'bench.ts',
    'bench-allreduce.node.ts',
    'bench-allreduce-peer.node.ts',
    'bench-wan.node.ts',
    'bench-wan-run.node.ts',
    'profile.ts',
    'dry-run.ts',
    'worker-summary.node.ts',
    'checkpoint-saver.node.ts',
    'recovery.node.ts',
  ]),
  // `run`'s and `launch`'s local workers: starting them, their progress, their summary, host discovery.
  ...group('src/cli', 'src/cli/launcher', [
    'run-workers.node.ts',
    'run-progress.node.ts',
    'run-summary.node.ts',
    'discovery.node.ts',
  ]),
  // The options: built from the job settings' schema where they write a setting, with their parsing.
  ...group('src/cli', 'src/cli/options', [
    'train-options.ts',
    'run-options.node.ts',
    'job-setting-options.ts',
    'aggregation-option.ts',
    'share-options.ts',
    'wan-options.ts',
    'link-options.node.ts',
    'model-option.ts',
    'table-option.node.ts',
    'text-option.node.ts',
    'ice-flags.node.ts',
    'secrets.node.ts',
    'recipes.ts',
    'training-data.node.ts',
  ]),
};

/** A moved file's new path relative to `from` (the layer test's sample import is written from src/comm/). */
const relativeFromComm = (moves, file) => `'../${moves.get(file).slice('src/'.length)}'`;

/**
 * Edits no path rule can make: exact text → text (given the moves), each checked to be there.
 * The layer test names its folders and a sample import by path; two texts say where a subcommand goes.
 */
export const SPECIAL_EDITS = [
  {
    file: 'test/architecture/imports.test.ts',
    why: 'src/distributed is no row now; its parts are',
    from: "        'src/distributed',\n",
    to: () =>
      ['api', 'train', 'robust', 'session', 'observe', 'reduce']
        .map((f) => `        'src/distributed/${f}',\n`)
        .join(''),
  },
  {
    file: 'test/architecture/imports.test.ts',
    why: 'the sample dynamic import must name a file of a row that src/comm may not import',
    from: "'../distributed/trainer.ts'",
    to: (moves) => relativeFromComm(moves, 'src/distributed/trainer.ts'),
  },
  {
    file: 'docs/ARCHITECTURE.md',
    why: 'subcommands live in src/cli/commands/',
    from: 'CLI subcommands: one file each in `src/cli/` returning',
    to: () => 'CLI subcommands: one file each in `src/cli/commands/` returning',
  },
  {
    file: 'README.md',
    why: "the layout names the new folders' parts",
    from: "`comm` and `collectives` (links, ring-allreduce), `signaling`, `distributed`, `sim` (the simulator's cost models), `cli` |",
    to: () =>
      '`comm` and `collectives` (links, ring-allreduce: codecs, controller, transfer, algorithms, robust), `signaling`, ' +
      "`distributed` (session, reduce, api, robust, train, observe), `sim` (the simulator's cost models), `cli` (options, launcher, commands) |",
  },
  {
    file: 'src/cli/program.ts',
    why: 'subcommands live in src/cli/commands/',
    from: 'To add a subcommand, write `src/cli/<name>.ts`',
    to: () => 'To add a subcommand, write `src/cli/commands/<name>.ts`',
  },
];
