#!/usr/bin/env node
/**
 * node bench/profile.mjs [--quants q4_k_m,q8_0] [--prompt 128] [--update-results]
 *
 * Where the time goes (issue 31, item 2): the instructions of one decode token and of one prefill
 * chunk on the medium qwen3moe preset, counted by valgrind's callgrind (counts, not timings: the
 * same on a busy shared machine), split by the forward pass's phases:
 *
 *   attention  attn_norm (q/k/v activations), q k v, RoPE and cache, attention, attn_output
 *   router     ffn_norm, the router matrix, top-k
 *   experts    gather, gate/up, down activations, down (the routed experts and their kernels)
 *   head       output_norm and the LM head (the last row's logits)
 *
 * Each phase's instructions per multiply-accumulate of its weight matrices (a decode token: one
 * per weight it reads; a prefill chunk: one per weight and row routed to it), and the most costly
 * functions with their own counts. Valgrind has no AVX-512: the counts are of the AVX2 path
 * (the kernels' bits are the same on every path; the instruction mix is not).
 *
 * Results: results/local/profile.json; --update-results: results/profile.json and the README table.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, openSync, readSync, closeSync, statSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { importDist, presetModel } from './lib/moetier.mjs';
import { parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';

const usage = 'usage: node bench/profile.mjs [options]   (needs valgrind: apt-get install valgrind)';
const options = {
  quants: { type: 'string', default: 'q4_k_m,q8_0', help: 'medium qwen3moe quantisations, comma-separated' },
  prompt: { type: 'string', default: '128', help: 'rows of the prefill chunk profiled' },
};

/** The forward pass's phase functions (native/cpu/forward_eval.cc, forward_moe.cc) by category. */
export const PHASES = {
  attention: ['attn_norm_phase', 'qkv_phase', 'qk_post_phase', 'attention_phase', 'attn_prep_phase', 'attn_out_phase'],
  router: ['ffn_norm_phase', 'router_phase', 'route_phase'],
  experts: ['gather_phase', 'gate_up_phase', 'down_prep_phase', 'down_phase', 'combine_phase'],
  head: ['output_norm_phase', 'output_phase'],
};

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const rows = positiveInt('prompt', values.prompt, 256);
  const cases = [];
  for (const quant of values.quants.split(',')) {
    const model = await presetModel({ preset: 'medium', arch: 'qwen3moe', quant });
    const shape = await modelShape(model);
    const parts = profileParts(model, rows);
    const typeNames = await typeNamesById();
    cases.push(profileCase(quant, 'decode', 1, parts[4], shape, typeNames));
    cases.push(profileCase(quant, 'prefill', rows, parts[2], shape, typeNames));
    process.stderr.write(`${quant}: profiled\n`);
  }
  const results = {
    date: new Date().toISOString(),
    cpu: os.cpus()[0]?.model,
    counter: 'callgrind Ir (instructions), 1 thread, AVX2 path (valgrind has no AVX-512)',
    model: 'medium qwen3moe (realistic synthetic routing)',
    cases,
  };
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'profile', JSON.stringify(results, null, 2) + '\n');
  updateReadme(target, 'profile', profileTable(results));
  process.stdout.write(profileTable(results) + '\n');
}

/** Runs the child under callgrind; returns part number -> callgrind_annotate's inclusive and self lines. */
function profileParts(model, rows) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'moetier-profile-'));
  try {
    const out = path.join(dir, 'cg.out');
    const child = fileURLToPath(new URL('profile-child.mjs', import.meta.url));
    execFileSync(
      'valgrind',
      [
        '--tool=callgrind',
        '--collect-atstart=yes',
        '--dump-after=mt_eval',
        `--callgrind-out-file=${out}`,
        process.execPath,
        child,
        model,
        String(rows),
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 64 << 20 },
    );
    const parts = {};
    for (const part of [2, 4]) {
      const file = `${out}.${part}`;
      parts[part] = {
        inclusive: annotate(file, true),
        self: annotate(file, false),
      };
    }
    return parts;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** callgrind_annotate's function lines of moetier's addon: [{ ir, name }], name without its file and object. */
function annotate(file, inclusive) {
  const text = execFileSync(
    'callgrind_annotate',
    [`--inclusive=${inclusive ? 'yes' : 'no'}`, '--threshold=100', file],
    {
      encoding: 'utf8',
      maxBuffer: 256 << 20,
    },
  );
  const lines = [];
  for (const line of text.split('\n')) {
    const m = /^\s*([\d,]+)\s+\([\s\d.]+%\)\s+(.*)$/.exec(line);
    if (!m || !m[2].endsWith('moetier.node]')) continue; // node's and libc's frames hold the addon's
    const name = m[2].replace(/^[^:]*:/, '').replace(/ \[[^\]]*\]$/, '');
    lines.push({ ir: Number(m[1].replaceAll(',', '')), name });
  }
  return lines;
}

/** Inclusive count of the function named `fn` (a C name, or a C++ name's last part). */
function inclusiveOf(lines, fn) {
  const hit = lines.find((l) => new RegExp(`(^|::)${fn}(\\(|$)`).test(l.name));
  return hit ? hit.ir : 0;
}

function profileCase(quant, phase, rows, part, shape, typeNames) {
  const total = inclusiveOf(part.inclusive, 'mt_eval');
  const macs = phaseMacs(shape, rows);
  const categories = {};
  let counted = 0;
  for (const [category, fns] of Object.entries(PHASES)) {
    const ir = fns.reduce((a, fn) => a + inclusiveOf(part.inclusive, fn), 0);
    counted += ir;
    categories[category] = {
      ir,
      share: ir / total,
      macs: macs[category],
      irPerMac: ir / macs[category],
      types: shape.types[category],
    };
  }
  categories.other = { ir: total - counted, share: (total - counted) / total };
  const top = part.self.slice(0, 8).map((l) => ({ name: shortName(l.name, typeNames), ir: l.ir, share: l.ir / total }));
  return { quant, phase, rows, totalIr: total, irPerRow: total / rows, categories, top };
}

/** A C++ symbol without its argument list and anonymous namespaces, its kernels' type ids named (kquant_matvec<Q4_K, ...>). */
function shortName(name, typeNames) {
  return name
    .replace(/\(anonymous namespace\)::/g, '')
    .replace(/\(.*$/, '')
    .replace(/<(\d+),/, (m, id) => `<${typeNames.get(Number(id)) ?? id},`)
    .slice(0, 80);
}

/** ggml type id -> name (src/model/types.ts). */
async function typeNamesById() {
  const { GGML_TYPE } = await importDist('src/model/types.js');
  return new Map(Object.entries(GGML_TYPE).map(([name, id]) => [id, name]));
}

/**
 * Multiply-accumulates of each category's weight matrices for `rows` rows: attention's q k v o and
 * the router per row; the experts per routed (row, expert) pair; the head for the last row only.
 */
function phaseMacs(s, rows) {
  const attention = s.nLayer * s.nEmbd * (2 * s.qDim + 2 * s.kvDim) * rows;
  const router = s.nLayer * s.nEmbd * s.nExpert * rows;
  const experts = s.nLayer * s.nExpertUsed * 3 * s.nEmbd * s.nFfExp * rows;
  const head = s.nEmbd * s.nVocab;
  return { attention, router, experts, head };
}

/** The model's shape and the tensor types of each category, from its GGUF header. */
async function modelShape(file) {
  const { parseGguf } = await importDist('src/model/gguf/reader.js');
  const { readHParams } = await importDist('src/model/hparams.js');
  const size = statSync(file).size;
  const head = Buffer.alloc(Math.min(size, 64 << 20));
  const fd = openSync(file, 'r');
  try {
    readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  const gguf = parseGguf(head, file, size);
  const hp = readHParams(gguf);
  const typesOf = (re) =>
    [...new Set([...gguf.tensors.values()].filter((t) => re.test(t.name)).map((t) => t.type))].sort();
  return {
    ...hp,
    qDim: hp.nHead * hp.headDim,
    kvDim: hp.nHeadKv * hp.headDim,
    types: {
      attention: typesOf(/attn_(q|k|v|output)\.weight$/),
      router: typesOf(/ffn_gate_inp\.weight$/),
      experts: typesOf(/ffn_(gate|up|down)_exps\.weight$/),
      head: typesOf(/^output\.weight$/),
    },
  };
}

export function profileTable(r) {
  const head = `Instructions per forward pass, ${r.model}, ${r.counter}, ${r.cpu}, ${r.date}. \`node bench/profile.mjs --update-results\`. Per category: share of the eval's instructions, and instructions per multiply-accumulate of its weights (types in brackets).`;
  const lines = [
    '| model | eval | instructions / row | attention | router | experts | head | other |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const c of r.cases) {
    const cell = (k) => {
      const x = c.categories[k];
      return `${(100 * x.share).toFixed(1)} %, ${x.irPerMac.toFixed(2)} / MAC [${x.types.join(', ')}]`;
    };
    lines.push(
      `| ${c.quant} | ${c.phase === 'decode' ? 'decode token' : `prefill chunk of ${c.rows}`} | ${(c.irPerRow / 1e6).toFixed(1)} M | ${cell('attention')} | ${cell('router')} | ${cell('experts')} | ${cell('head')} | ${(100 * c.categories.other.share).toFixed(1)} % |`,
    );
  }
  const tops = r.cases.map(
    (c) =>
      `- ${c.quant} ${c.phase}: ` +
      c.top
        .slice(0, 5)
        .map((t) => `\`${t.name}\` ${(100 * t.share).toFixed(1)} %`)
        .join(', '),
  );
  return `${head}\n\n${lines.join('\n')}\n\nThe costliest functions (own instructions):\n${tops.join('\n')}`;
}

if (import.meta.url === `file://${process.argv[1]}`) runBenchMain('profile', main);
