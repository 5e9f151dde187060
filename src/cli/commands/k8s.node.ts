/**
 * `ringtrain k8s render [--values FILE] [--out FILE]`: the Kubernetes
 * manifests of a ringtrain deployment (signaling server, workers, secrets),
 * rendered from a JSON values file (deploy/k8s/values.ts lists the fields and
 * defaults) as YAML for `kubectl apply -f -`. docs/KUBERNETES.md explains.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { renderManifests } from '../../../deploy/k8s/render.ts';
import { parseValues } from '../../../deploy/k8s/values.ts';
import { toYaml } from '../../../deploy/k8s/yaml.ts';
import { printLine } from '../host.node.ts';

/** Reads and checks a values file; names the file in every refusal. */
export function readValuesFile(path: string): ReturnType<typeof parseValues> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `cannot read --values ${path}: ${(err as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `--values ${path} is not JSON (${(err as Error).message}).`);
  }
  try {
    return parseValues(value);
  } catch (err) {
    if (err instanceof RingtrainError) throw new RingtrainError(err.code, `${path}: ${err.message}`, err.detail);
    throw err;
  }
}

export function k8sCommand(): Command {
  const k8s = new Command('k8s').description(
    'Kubernetes: render the manifests of a ringtrain deployment (docs/KUBERNETES.md)',
  );
  k8s.addCommand(
    new Command('render')
      .description(
        'print the manifests (server Deployment, Service, Ingress, worker StatefulSet or Job, Secrets) as YAML or JSON',
      )
      .option('--values <file>', 'JSON values (fields and defaults: deploy/k8s/values.ts); default: all defaults')
      .addOption(
        new Option('--format <kind>', 'yaml (documents separated by ---) or json (a v1 List)')
          .choices(['yaml', 'json'])
          .default('yaml'),
      )
      .option('--out <file>', 'write here instead of stdout')
      .action(async (o: { values?: string; format: 'yaml' | 'json'; out?: string }) => {
        const values = o.values ? readValuesFile(o.values) : parseValues({});
        const objects = renderManifests(values);
        const text =
          o.format === 'json'
            ? `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }, null, 2)}\n`
            : toYaml(objects);
        if (o.out) writeFileSync(o.out, text);
        else await printLine(text.trimEnd());
      })
      .exitOverride(),
  );
  return k8s;
}
