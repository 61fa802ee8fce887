/** moetier's public API. */
export { openEngine } from './engine/engine.js';
export type { Engine, EngineOptions, GenerateOptions, GeneratedToken } from './engine/engine.js';
export type { GenerationStats } from './engine/stats.js';
export type { SamplingOptions } from './engine/sampler.js';
export * from './core/errors.js';
export { limits } from './core/limits.js';
export type { Arch, HParams } from './model/types.js';
