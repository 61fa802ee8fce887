/**
 * node bench/predict.mjs [--presets tiny,small,medium --routing realistic,planted --tokens N --update-results]
 *
 * Route prediction (issue 13, item 1): how well each layer's router applied to the residual
 * stream entering the layer (mt_eval_args.predicted: before its attention) predicts the experts
 * the layer then routes to. Greedy decode of the routing prompts (src/synth/prompts.ts ROUTING_PROMPTS)
 * on each qwen3moe preset at Q8_0, with realistic routing (the presets' default) and planted routing
 * (a decode locked into one topic's experts), one token per eval; per layer and over all layers:
 *   recall@k    |top-k predicted ∩ routed| / k       (k = nExpertUsed)
 *   recall@2k   |top-2k predicted ∩ routed| / k
 *   precision@2k |top-2k predicted ∩ routed| / 2k
 * Realistic routing keeps part of a layer's routing out of the stream entering it (each layer's
 * attention writes into the context its router reads: src/synth/routing.ts); how much is fitted to
 * nothing measured on a trained model, so these figures are a guide, not a claim about one.
 */
import os from 'node:os';
import { importDist, presetModel } from './lib/moetier.mjs';
import { parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';

const usage =
  'usage: node bench/predict.mjs [--presets tiny,small,medium --routing realistic,planted --tokens N --update-results]';
const options = {
  presets: { type: 'string', default: 'tiny,small,medium', help: 'qwen3moe presets (Q8_0)' },
  routing: { type: 'string', default: 'realistic,planted', help: "the models' routing kinds" },
  tokens: { type: 'string', default: '64', help: 'decode tokens per prompt' },
};

async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const tokens = positiveInt('tokens', values.tokens, 4096);
  const loadAverageAtStart = os.loadavg();
  const native = (await importDist('src/native/binding.js')).loadNative();
  const { loadModel } = await importDist('src/model/load.js');
  const { ROUTING_PROMPTS, promptText } = await importDist('src/synth/prompts.js');
  const prompts = ROUTING_PROMPTS.map((p) => promptText(p, 'gpt2'));
  const rows = [];
  for (const routing of values.routing.split(',')) {
    for (const preset of values.presets.split(',')) {
      const path = await presetModel({ preset, arch: 'qwen3moe', quant: 'q8_0', routing });
      const model = loadModel(native, path);
      try {
        rows.push({ preset, routing, ...(await measure(native, model, tokens, prompts)) });
      } finally {
        native.freeModel(model.nativeModel);
        native.unmapFile(model.mapping);
      }
      process.stderr.write(
        `predict ${preset} (${routing}): recall@k ${rows.at(-1).recallK.toFixed(3)}, recall@2k ${rows.at(-1).recall2K.toFixed(3)}\n`,
      );
    }
  }
  const summary = {
    date: new Date().toISOString(),
    cpuModel: os.cpus()[0]?.model,
    command: `node bench/predict.mjs ${argv.join(' ')}`.trim(),
    loadAverageAtStart,
    loadAverageAtEnd: os.loadavg(),
    tokens,
    prompts,
    rows,
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'predict', JSON.stringify(summary, null, 2) + '\n');
  updateReadme(target, 'predict', table(summary));
}

async function measure(native, model, tokens, prompts) {
  const hp = model.hparams,
    K = hp.nExpertUsed;
  const perLayer = Array.from({ length: hp.nLayer }, () => ({ k: 0, twoK: 0, steps: 0 }));
  for (const text of prompts) {
    const ctx = native.createContext(model.nativeModel, { nCtx: 256, threads: 2 });
    try {
      const ids = model.tokenizer.encode(text);
      const logits = new Float32Array(hp.nVocab);
      await native.evalAsync(ctx, Int32Array.from(ids), 0, logits);
      let pos = ids.length;
      const routes = new Int32Array(hp.nLayer * K),
        predicted = new Int32Array(hp.nLayer * 2 * K);
      for (let t = 0; t < tokens; t++) {
        const next = argmax(logits);
        await native.evalAsync(ctx, Int32Array.of(next), pos++, logits, { routes, predicted, predictK: 2 * K });
        for (let l = 0; l < hp.nLayer; l++) {
          const routed = new Set(routes.subarray(l * K, (l + 1) * K));
          const guess = predicted.subarray(l * 2 * K, (l + 1) * 2 * K);
          for (let j = 0; j < 2 * K; j++) {
            if (!routed.has(guess[j])) continue;
            if (j < K) perLayer[l].k++;
            perLayer[l].twoK++;
          }
          perLayer[l].steps++;
        }
      }
    } finally {
      native.freeContext(ctx);
    }
  }
  const layers = perLayer.map((c) => ({
    recallK: c.k / (c.steps * K),
    recall2K: c.twoK / (c.steps * K),
    precision2K: c.twoK / (c.steps * 2 * K),
  }));
  const mean = (f) => layers.reduce((a, x) => a + x[f], 0) / layers.length;
  return {
    nLayer: hp.nLayer,
    nExpert: hp.nExpert,
    k: K,
    steps: perLayer[0].steps,
    recallK: mean('recallK'),
    recall2K: mean('recall2K'),
    precision2K: mean('precision2K'),
    layers,
  };
}

function argmax(a) {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
  return best;
}

function table(s) {
  const f = (x) => x.toFixed(3);
  const range = (r, key) =>
    `${f(Math.min(...r.layers.map((x) => x[key])))}-${f(Math.max(...r.layers.map((x) => x[key])))}`;
  return [
    `Measured ${s.date.slice(0, 10)} on ${s.cpuModel}; ${s.prompts.length} prompts (ROUTING_PROMPTS) x ${s.tokens} greedy decode tokens per preset (qwen3moe, Q8_0).`,
    '',
    '| preset | routing | layers x experts, k | decode steps | recall@k (layers' +
      "'" +
      ' range) | recall@2k (range) | precision@2k |',
    '|---|---|---|---|---|---|---|',
    ...s.rows.map(
      (r) =>
        `| ${r.preset} | ${r.routing === 'planted' ? 'planted' : 'realistic synthetic'} | ${r.nLayer} x ${r.nExpert}, ${r.k} | ${r.steps} | ${f(r.recallK)} (${range(r, 'recallK')}) | ${f(r.recall2K)} (${range(r, 'recall2K')}) | ${f(r.precision2K)} |`,
    ),
  ].join('\n');
}

runBenchMain('predict', main);
