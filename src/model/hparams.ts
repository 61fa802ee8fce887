/**
 * GgufFile -> HParams, then validation: every tensor the architecture needs
 * (src/model/arch.ts) must exist with the dims the hyper-parameters imply.
 * Keys are `<arch>.<name>`; flags per architecture follow docs/FORWARD.md.
 */
import { GgufFormatError, UnsupportedModelError } from '../core/errors.js';
import { ARCH_FLAGS, expectedTensors } from './arch.js';
import { metaFloat, metaString, metaUint } from './gguf/metadata.js';
import type { Arch, GgufFile, HParams } from './types.js';

const SUPPORTED_ARCHS = Object.keys(ARCH_FLAGS) as Arch[];

/** Caps that keep a corrupt header from implying absurd work; real MoE models stay far below. */
const DIM_MAX = 1 << 20;
const EXPERTS_MAX = 1 << 12;

export function readHParams(file: GgufFile): HParams {
  const arch = readArch(file);
  const hp = readKeys(file, arch);
  checkConsistency(file, hp);
  checkTensors(file, hp);
  return hp;
}

function readArch(file: GgufFile): Arch {
  const arch = metaString(file, 'general.architecture');
  if (!(SUPPORTED_ARCHS as string[]).includes(arch)) {
    throw new UnsupportedModelError(file.path, 'key general.architecture',
      `one of ${SUPPORTED_ARCHS.join(', ')} (llama only with experts, e.g. Mixtral), got ${JSON.stringify(arch)}`);
  }
  return arch as Arch;
}

function readKeys(file: GgufFile, arch: Arch): HParams {
  const k = (name: string): string => `${arch}.${name}`;
  const dim = (name: string, fallback?: number): number => metaUint(file, k(name), { min: 1, max: DIM_MAX, fallback });
  if (arch === 'llama' && metaUint(file, k('expert_count'), { fallback: 0 }) === 0) {
    throw new UnsupportedModelError(file.path, `key ${k('expert_count')}`,
      'a value > 0: moetier runs Mixture-of-Experts models only, and this llama model is dense');
  }
  const nEmbd = dim('embedding_length');
  const nHead = dim('attention.head_count');
  const nLayer = dim('block_count');
  const token = file.tensors.get('token_embd.weight');
  if (token === undefined || token.dims.length !== 2) {
    throw new GgufFormatError(file.path, 'tensor token_embd.weight', `a tensor of dims [${nEmbd}, nVocab]`);
  }
  const flags = ARCH_FLAGS[arch];
  return {
    arch,
    nLayer,
    nEmbd,
    nHead,
    nHeadKv: dim('attention.head_count_kv', nHead),
    headDim: dim('attention.key_length', nEmbd % nHead === 0 ? nEmbd / nHead : undefined),
    nVocab: token.dims[1],
    nCtxTrain: dim('context_length'),
    nExpert: metaUint(file, k('expert_count'), { min: 1, max: EXPERTS_MAX }),
    nExpertUsed: metaUint(file, k('expert_used_count'), { min: 1, max: EXPERTS_MAX }),
    nFfExp: dim(arch === 'llama' ? 'feed_forward_length' : 'expert_feed_forward_length'),
    nFfShexp: flags.sharedExpert ? dim('expert_shared_feed_forward_length') : 0,
    rmsEps: metaFloat(file, k('attention.layer_norm_rms_epsilon'), { positive: true }),
    ropeBase: metaFloat(file, k('rope.freq_base'), { positive: true, fallback: 10000 }),
    tiedOutput: !file.tensors.has('output.weight'),
    ...flags,
  };
}

function checkConsistency(file: GgufFile, hp: HParams): void {
  const k = (name: string): string => `key ${hp.arch}.${name}`;
  const fail = (where: string, expected: string): never => {
    throw new GgufFormatError(file.path, where, expected);
  };
  if (hp.nHead % hp.nHeadKv !== 0) fail(k('attention.head_count_kv'), `a divisor of head_count ${hp.nHead}, got ${hp.nHeadKv}`);
  if (hp.headDim % 2 !== 0) fail(k('attention.key_length'), `an even head dim (rope rotates pairs), got ${hp.headDim}`);
  // RoPE here rotates the whole head; a partial-rotary model (rope.dimension_count < head dim)
  // would be silently wrong, so it is refused until partial rotation exists.
  const ropeDims = file.metadata.get(`${hp.arch}.rope.dimension_count`);
  if (ropeDims !== undefined) {
    if (typeof ropeDims !== 'number' || !Number.isInteger(ropeDims) || ropeDims < 2 || ropeDims > hp.headDim || ropeDims % 2 !== 0) {
      fail(k('rope.dimension_count'), `an even integer in [2, head dim ${hp.headDim}], got ${String(ropeDims)}`);
    }
    if (ropeDims !== hp.headDim) {
      throw new UnsupportedModelError(file.path, k('rope.dimension_count'),
        `the head dim ${hp.headDim} (partial rotary embeddings are not implemented), got ${String(ropeDims)}`);
    }
  }
  const valueLength = file.metadata.get(`${hp.arch}.attention.value_length`);
  if (valueLength !== undefined && valueLength !== hp.headDim) {
    throw new UnsupportedModelError(file.path, k('attention.value_length'), `the key length ${hp.headDim}, got ${String(valueLength)}`);
  }
  if (hp.nExpertUsed > hp.nExpert) fail(k('expert_used_count'), `at most expert_count ${hp.nExpert}, got ${hp.nExpertUsed}`);
  // Each layer needs a dozen tensors: a block count beyond the tensor count is corrupt (and would make us loop).
  if (hp.nLayer > file.tensors.size) fail(k('block_count'), `at most the tensor count ${file.tensors.size}, got ${hp.nLayer}`);
  const tokens = file.metadata.get('tokenizer.ggml.tokens');
  if (Array.isArray(tokens) && tokens.length !== hp.nVocab) {
    fail('key tokenizer.ggml.tokens', `one token per row of token_embd.weight (${hp.nVocab}), got ${tokens.length}`);
  }
}

/** Each needed tensor exists with its implied dims; 1-D norms and biases are F32. */
function checkTensors(file: GgufFile, hp: HParams): void {
  for (const spec of expectedTensors(hp)) {
    const info = file.tensors.get(spec.name);
    const dims = `[${spec.dims.join(', ')}]`;
    if (info === undefined) {
      throw new GgufFormatError(file.path, `tensor ${spec.name}`, `a tensor of dims ${dims}, which ${hp.arch} needs, but it is missing`);
    }
    if (info.dims.length !== spec.dims.length || info.dims.some((d, i) => d !== spec.dims[i])) {
      throw new GgufFormatError(file.path, `tensor ${spec.name}`, `dims ${dims} (from the hyper-parameters), got [${info.dims.join(', ')}]`);
    }
    if ((spec.role === 'norm' || spec.role === 'bias') && info.type !== 'F32') {
      throw new UnsupportedModelError(file.path, `tensor ${spec.name}`, `type F32 for a 1-D ${spec.role}, got ${info.type}`);
    }
  }
}
