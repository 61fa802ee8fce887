/**
 * Seeded randomness for the synthetic models: sfc32 (fast, 128-bit state, good
 * statistics) keyed by (seed, label), so every tensor and every token vector has
 * its own stream and the bytes do not depend on generation order.
 */

/** 32-bit FNV-1a of a string, then one murmur finaliser round: seeds, not security. */
function hash32(text: string, salt: number): number {
  let h = (0x811c9dc5 ^ salt) >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;
  private spare: number | undefined;

  /** A stream for `label` under the model seed `seed`. */
  constructor(seed: number, label: string) {
    const key = `${seed}:${label}`;
    this.a = hash32(key, 1) | 0; // int32 fields keep the hot loops in integer registers
    this.b = hash32(key, 2) | 0;
    this.c = hash32(key, 3) | 0;
    this.d = hash32(key, 4) | 1;
    for (let i = 0; i < 12; i++) this.nextU32(); // mix the seeded state
  }

  /** sfc32 step: a uniform 32-bit unsigned integer. */
  nextU32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform in [0, 1). */
  uniform(): number {
    return this.nextU32() / 4294967296;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.uniform() * n);
  }

  /** Standard normal (Box-Muller, the second value kept for the next call). */
  normal(): number {
    if (this.spare !== undefined) {
      const s = this.spare;
      this.spare = undefined;
      return s;
    }
    const u = 1 - this.uniform(); // (0, 1]: log is finite
    const v = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }

  /**
   * out[i] = uniform in [-1, 1) * sqrt(3) * sd: zero mean, standard deviation sd.
   * The sfc32 step is inlined on local int32 state: the hot loop of model generation.
   */
  fillUniform(out: Float32Array, sd: number, offset = 0, length = out.length - offset): void {
    const scale = (Math.sqrt(3) * sd) / 2147483648; // signed int32 / 2^31 is in [-1, 1)
    let { a, b, c, d } = this;
    for (let i = offset; i < offset + length; i++) {
      const t = (((a + b) | 0) + d) | 0;
      d = (d + 1) | 0;
      a = b ^ (b >>> 9);
      b = (c + (c << 3)) | 0;
      c = (c << 21) | (c >>> 11);
      c = (c + t) | 0;
      out[i] = t * scale;
    }
    this.a = a;
    this.b = b;
    this.c = c;
    this.d = d;
  }

  /**
   * The sfc32 words a, b, c, d: a native fill (synthUniformAsync, src/synth/weights-native.ts) draws
   * the same stream from them, and setState continues this Rng after it. No normal() pending.
   */
  state(): Int32Array {
    return Int32Array.of(this.a, this.b, this.c, this.d);
  }

  setState(words: Int32Array): void {
    [this.a, this.b, this.c, this.d] = [words[0] | 0, words[1] | 0, words[2] | 0, words[3] | 0];
    this.spare = undefined;
  }

  /** A Fisher-Yates shuffled copy of [0, n). */
  permutation(n: number): number[] {
    const p = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [p[i], p[j]] = [p[j], p[i]];
    }
    return p;
  }
}
