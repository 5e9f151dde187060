/**
 * The model API: `Module`, as in PyTorch. A module holds `Parameter`s and
 * child modules as ordinary properties; `namedParameters()` walks them in
 * the order they were assigned and names each by its path, as a PyTorch
 * state dict does (`blocks.0.attn.qkv.weight`; arrays of modules count from
 * 0). That name is the checkpoint key and the layout entry.
 *
 * `forward(x)` is written with the ops of functional.ts on symbolic tensors
 * and runs once per input shape. Call child modules with `child.call(x)`
 * (not `child.forward(x)`) so that errors name the layer.
 *
 * Train and eval modes, as in PyTorch: `training` is true by default;
 * `train()` / `eval()` set it on the whole subtree. A forward reads it when it
 * is traced (Dropout masks in training, is the identity in eval), so a model
 * plans the two modes separately: GraphModel trains in train mode and
 * predicts and evaluates in eval mode.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { Parameter, type Tensor } from './tensor.ts';

export abstract class Module {
  /** The module's path in its model (`blocks.0.attn`); set by `nameTree`. */
  path = '';
  /** Train mode (true, the default) or eval mode; set with `train()` / `eval()`. */
  training = true;

  /** Sets train mode (or eval mode with `false`) on this module and every module below it. */
  train(mode = true): this {
    for (const m of this.modules()) m.training = mode;
    return this;
  }

  /** Eval mode: `train(false)`. */
  eval(): this {
    return this.train(false);
  }

  /** This module and every module below it, depth first (a module reached twice is listed once). */
  modules(seen = new Set<Module>()): Module[] {
    if (seen.has(this)) return [];
    seen.add(this);
    const out: Module[] = [this];
    for (const [, value] of this.members()) if (value instanceof Module) out.push(...value.modules(seen));
    return out;
  }

  abstract forward(...inputs: Tensor[]): Tensor;

  /** Runs forward with this module's path as the layer named in errors. */
  call(...inputs: Tensor[]): Tensor {
    if (inputs.length === 0)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${this.path || this.constructor.name}.call() needs at least one tensor`,
      );
    return inputs[0].graph.within(this.path || this.constructor.name, () => this.forward(...inputs));
  }

  /** Child modules and parameters as [property name, value], in assignment order. */
  protected members(): [string, Module | Parameter][] {
    const out: [string, Module | Parameter][] = [];
    for (const [key, value] of Object.entries(this)) {
      if (value instanceof Module || value instanceof Parameter) out.push([key, value]);
      else if (Array.isArray(value))
        value.forEach((v, i) => (v instanceof Module || v instanceof Parameter) && out.push([`${key}.${i}`, v]));
    }
    return out;
  }

  /** Every parameter with its state-dict name, depth first in assignment order. A parameter reached twice (tied) is listed once. */
  namedParameters(prefix = '', seen = new Set<Parameter>()): [string, Parameter][] {
    const out: [string, Parameter][] = [];
    for (const [key, value] of this.members()) {
      const name = prefix ? `${prefix}.${key}` : key;
      if (value instanceof Parameter) {
        if (!seen.has(value)) out.push([name, value]);
        seen.add(value);
      } else out.push(...value.namedParameters(name, seen));
    }
    return out;
  }

  /** Sets `path` on every module and `name` on every parameter below this one (the model calls it once). */
  nameTree(prefix = ''): void {
    this.path = prefix;
    for (const [key, value] of this.members()) {
      const name = prefix ? `${prefix}.${key}` : key;
      if (value instanceof Module) value.nameTree(name);
      else if (!value.name) value.name = name;
    }
  }
}

/** A stack of modules applied in order; children are named 0, 1, … as in torch.nn.Sequential. */
export class Sequential extends Module {
  readonly layers: Module[];
  constructor(...layers: Module[]) {
    super();
    layers.forEach((m, i) => {
      if (!(m instanceof Module))
        throw new RingtrainError(ErrorCode.InvalidArgument, `Sequential: item ${i} is not a Module (${String(m)})`, {
          index: i,
        });
    });
    this.layers = layers;
  }

  protected override members(): [string, Module | Parameter][] {
    return this.layers.map((m, i) => [String(i), m]);
  }

  forward(x: Tensor): Tensor {
    return this.layers.reduce((t, m) => m.call(t), x);
  }
}
