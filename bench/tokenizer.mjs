/**
 * node bench/tokenizer.mjs [--vocabularies gptoss --models tiny/gpt-oss/q8_0 --random 3000 --seed 1 --update-results]
 *
 * moetier's tokenizer against llama.cpp's, id for id, on real vocabularies and on generated
 * models' own: the hand corpus of the tokenizer test (tests/fixtures/tokenizers/corpus.mjs) and
 * --random seeded random strings (bench/lib/random-text.mjs), each tokenized by both with special
 * tokens parsed and not, then llama.cpp's ids detokenized by both; and the end-of-generation sets.
 *
 *   vocabulary (tests/fixtures/tokenizers/vocabularies.mjs, as GGUF metadata) or preset model
 *     -> moetier: createTokenizer(parseGguf(file))              (dist/, in process)
 *     -> llama.cpp: record-child.mjs, node-llama-cpp vocabOnly   (a child: bad metadata can abort it)
 *     -> per string: ids special / plain equal, decode(llama.cpp's ids) == llama.cpp's text
 *
 * The corpus test checks the recorded ids of the hand corpus in `npm test`; this reruns llama.cpp
 * live and adds the random strings, which are too many to record.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureBenchDeps } from './lib/deps.mjs';
import { BenchSetupError } from './lib/errors.mjs';
import { importDist, presetModel, repoRoot } from './lib/moetier.mjs';
import { parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { randomStrings } from './lib/random-text.mjs';

const usage =
  'usage: node bench/tokenizer.mjs [--vocabularies gptoss --models tiny/gpt-oss/q8_0 --random 3000 --seed 1 --update-results]';
const options = {
  vocabularies: {
    type: 'string',
    default: 'gptoss',
    help: 'real vocabularies to check: qwen3, llama3, llama2, gptoss (comma list; "none" for none)',
  },
  models: {
    type: 'string',
    default: 'tiny/gpt-oss/q8_0',
    help: 'generated models to check, preset/arch/quant (comma list; "none" for none)',
  },
  random: { type: 'string', default: '3000', help: 'random strings per vocabulary' },
  seed: { type: 'string', default: '1', help: 'seed of the random strings' },
};
const fixtures = path.join(repoRoot, 'tests/fixtures/tokenizers');
/** Mismatching strings kept in the results per vocabulary and check. */
const EXAMPLES_MAX = 5;

async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const randomCount = positiveInt('random', values.random, 100_000);
  const seed = positiveInt('seed', values.seed, 0xffffffff);
  ensureBenchDeps();
  const { CORPUS } = await import(path.join(fixtures, 'corpus.mjs'));
  const { VOCABULARIES, vocabularyKv } = await import(path.join(fixtures, 'vocabularies.mjs'));
  const { mulberry32 } = await importDist('src/core/prng.js');
  const random = randomStrings(randomCount, mulberry32(seed));
  const list = (text) => (text === 'none' ? [] : text.split(','));
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'moetier-bench-tokenizer-'));
  const rows = [];
  try {
    const { writeGguf } = await importDist('src/model/gguf/writer.js');
    for (const name of list(values.vocabularies)) {
      if (VOCABULARIES[name] === undefined)
        throw new BenchSetupError(`unknown vocabulary ${name}`, `use one of ${Object.keys(VOCABULARIES).join(', ')}`);
      const file = path.join(scratch, `${name}.gguf`);
      await writeGguf(file, vocabularyKv(name), []);
      rows.push(await compare(name, file, CORPUS, random));
    }
    for (const spec of list(values.models)) {
      const [preset, arch, quant] = spec.split('/');
      const file = await presetModel({ preset, arch, quant });
      rows.push(await compare(spec, file, CORPUS, random));
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const summary = {
    date: new Date().toISOString(),
    command: `node bench/tokenizer.mjs ${argv.join(' ')}`.trim(),
    llamaCpp: rows[0]?.llamaCpp,
    seed,
    handStrings: CORPUS.length,
    randomStrings: randomCount,
    rows: rows.map(({ llamaCpp, ...row }) => row),
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'tokenizer', JSON.stringify(summary, null, 2) + '\n');
  updateReadme(target, 'tokenizer', table(summary));
  if (rows.some((r) => r.mismatches > 0 || !r.eogIdentical)) process.exitCode = 1;
}

/** One vocabulary: both tokenizers on the hand and random strings. */
async function compare(name, file, hand, random) {
  const { parseGguf } = await importDist('src/model/gguf/reader.js');
  const { createTokenizer } = await importDist('src/model/tokenizer/index.js');
  const { metaString } = await importDist('src/model/gguf/metadata.js');
  const gguf = parseGguf(new Uint8Array(readFileSync(file)), file);
  const tok = createTokenizer(gguf);
  const strings = [...hand, ...random];
  const theirs = llamaCpp(file, tok.vocabSize, strings);
  const checks = { special: [], plain: [], text: [] };
  const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  strings.forEach((s, i) => {
    const c = theirs.cases[i];
    const special = tok.encode(s, { addBos: false });
    const plain = tok.encode(s, { addBos: false, parseSpecial: false });
    if (!same(special, c.special)) checks.special.push({ i, s, moetier: special, llamaCpp: c.special });
    if (!same(plain, c.plain)) checks.plain.push({ i, s, moetier: plain, llamaCpp: c.plain });
    const text = tok.decode(c.special);
    if (text !== c.text) checks.text.push({ i, s, moetier: text, llamaCpp: c.text });
  });
  const count = (list, fromRandom) => list.filter((m) => m.i >= hand.length === fromRandom).length;
  const ours = [...tok.eogIds].sort((a, b) => a - b);
  const row = {
    name,
    pre: gguf.metadata.has('tokenizer.ggml.pre') ? metaString(gguf, 'tokenizer.ggml.pre') : undefined,
    vocabSize: tok.vocabSize,
    handMismatches: Object.fromEntries(Object.entries(checks).map(([k, l]) => [k, count(l, false)])),
    randomMismatches: Object.fromEntries(Object.entries(checks).map(([k, l]) => [k, count(l, true)])),
    mismatches: checks.special.length + checks.plain.length + checks.text.length,
    eogIdentical: same(ours, theirs.eogIds),
    eog: theirs.eogIds.map((id) => tok.tokenPiece(id)),
    examples: Object.fromEntries(Object.entries(checks).map(([k, l]) => [k, l.slice(0, EXAMPLES_MAX)])),
    llamaCpp: `node-llama-cpp ${theirs.llamaCppRelease.nodeLlamaCpp} (llama.cpp ${theirs.llamaCppRelease.llamaCpp})`,
  };
  process.stderr.write(
    `tokenizer ${name} (pre ${row.pre}): ${strings.length} strings, mismatches hand ${JSON.stringify(row.handMismatches)} random ${JSON.stringify(row.randomMismatches)}, eog ${row.eogIdentical ? 'identical' : 'DIFFERENT'}\n`,
  );
  return row;
}

/** llama.cpp's ids, detokenization and EOG set (the corpus recorder's child, run live). */
function llamaCpp(modelPath, vocabSize, strings) {
  const child = spawnSync(process.execPath, [path.join(fixtures, 'record-child.mjs')], {
    input: JSON.stringify({ modelPath, vocabSize, strings }),
    maxBuffer: 1 << 30,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  if (child.status !== 0)
    throw new BenchSetupError(`llama.cpp's tokenizer child exited ${child.status}`, 'see its stderr above');
  return JSON.parse(child.stdout.toString('utf8'));
}

function table(s) {
  const m = (x) => `${x.special} / ${x.plain} / ${x.text}`;
  return [
    `Measured ${s.date.slice(0, 10)} against ${s.llamaCpp}; ${s.handStrings} hand strings (the corpus test's) and ${s.randomStrings} random strings (seed ${s.seed}) per vocabulary. Mismatches are counted per string: ids with special tokens parsed / as text / detokenization of llama.cpp's ids.`,
    '',
    '| vocabulary | pre-tokenizer | tokens | hand mismatches | random mismatches | end-of-generation set |',
    '|---|---|---|---|---|---|',
    ...s.rows.map(
      (r) =>
        `| ${r.name} | ${r.pre ?? '(none)'} | ${r.vocabSize} | ${m(r.handMismatches)} | ${m(r.randomMismatches)} | ${r.eogIdentical ? 'identical' : 'differs'}: ${r.eog.map((t) => `\`${t.replaceAll('|', '\\|')}\``).join(' ')} |`,
    ),
  ].join('\n');
}

runBenchMain('tokenizer', main);
