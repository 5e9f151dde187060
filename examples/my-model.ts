/**
 * A model file, as the README's "Bring your own model" shows it: a residual
 * MLP for 28×28 digits with a layer norm and GELU. Train it with
 *   npx ringtrain run -np 2 --model ./examples/my-model.ts --optimizer adamw --steps 200
 *   npx ringtrain train --model ./examples/my-model.ts --model-options '{"width":128}'
 * The factory gets the model API (`nn`) and the model's options. It imports
 * only types from ringtrain (erased when it runs), so the file loads from any
 * directory; the classes it builds on are the ones in `nn`.
 */
import type { ModelFactory, Tensor } from 'ringtrain';

export interface Options {
  /** Width of the hidden layers (default 64). */
  width?: number;
}

const model: ModelFactory<Options> = (nn, options = {}) => {
  const width = options.width ?? 64;
  class Net extends nn.Module {
    inp = new nn.Linear(784, width);
    norm = new nn.LayerNorm(width);
    fc = new nn.Linear(width, width);
    head = new nn.Linear(width, 10);
    forward(x: Tensor): Tensor {
      const h = this.inp.call(x); // child modules are called with .call: errors then name the layer
      return this.head.call(nn.F.add(h, nn.F.gelu(this.fc.call(this.norm.call(h)))));
    }
  }
  return { module: new Net(), inputShape: [784], classes: 10 };
};
export default model;
