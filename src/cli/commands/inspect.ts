/** `moetier inspect`: what a model file is (architecture, shape, tensor types), and with --check-weights whether any weight is NaN or inf. */
import { InvalidOptionError } from '../../core/errors.js';
import { loadModel } from '../../model/load.js';
import { findNonFiniteWeights } from '../../model/check-weights.js';
import { loadNative } from '../../native/binding.js';
import { parseFlags } from '../args.js';
import type { Command } from '../command.js';
import { EXIT_FAILURE, EXIT_OK } from '../exit-code.js';

const usage = `usage: moetier inspect -m F [--check-weights] [--json]

  -m, --model F      the GGUF file
  --check-weights    scan every tensor for NaN and inf (float elements, quantised block scales); exit 1 if any
  --json             one JSON object on stdout`;

export async function inspectMain(argv: string[], out: (text: string) => void): Promise<number> {
  const a = parseFlags(
    argv,
    { model: { type: 'string', short: 'm' }, 'check-weights': { type: 'boolean' }, json: { type: 'boolean' } },
    'inspect',
  );
  const path = a.requireString('model');
  const native = loadNative();
  let model;
  try {
    model = loadModel(native, path);
  } catch (err) {
    if (err instanceof InvalidOptionError && err.option === 'model')
      throw new InvalidOptionError(a.flag('model'), 'an existing .gguf file', path);
    throw err;
  }
  try {
    const types: Record<string, number> = {};
    for (const t of model.file.tensors.values()) types[t.type] = (types[t.type] ?? 0) + 1;
    const nonFinite = a.bool('check-weights') ? findNonFiniteWeights(model.file) : undefined;
    const report = {
      file: path,
      bytes: model.file.size,
      hparams: model.hparams,
      tensorTypes: types,
      tensors: model.file.tensors.size,
      nonFiniteWeights: nonFinite,
    };
    if (a.bool('json')) out(JSON.stringify(report));
    else {
      const hp = model.hparams;
      out(
        `${path}: ${hp.arch}, ${hp.nLayer} layers${hp.denseLayers ? ` (the first ${hp.denseLayers.count} dense)` : ''}, ${hp.nExpert} experts (top-${hp.nExpertUsed}), hidden ${hp.nEmbd}, vocabulary ${hp.nVocab}, ${report.tensors} tensors (${Object.entries(
          types,
        )
          .map(([t, n]) => `${n} ${t}`)
          .join(', ')})`,
      );
      if (nonFinite) {
        out(
          nonFinite.length === 0
            ? 'weights: no NaN or inf'
            : nonFinite.map((w) => `non-finite: ${w.tensor}: ${w.count} (first at ${w.unit} ${w.index})`).join('\n'),
        );
      }
    }
    return nonFinite && nonFinite.length > 0 ? EXIT_FAILURE : EXIT_OK;
  } finally {
    native.freeModel(model.nativeModel);
    native.unmapFile(model.mapping);
  }
}

export const inspectCommand: Command = {
  name: 'inspect',
  summary: 'show what a model file is; --check-weights scans it for NaN and inf',
  usage,
  run: (argv) => inspectMain(argv, (text) => console.log(text)),
};
