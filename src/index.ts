/** moetier's public API. */
export { openEngine } from './engine/engine.js';
export type { Engine, EngineOptions, GenerateOptions, GeneratedToken } from './engine/engine.js';
export type { Conversation, ConversationOptions } from './engine/conversation.js';
export type { GenerationStats } from './engine/stats.js';
export type { SamplingOptions } from './engine/sampler.js';
export * from './core/errors.js';
export { limits } from './core/limits.js';
export type { Arch, HParams } from './model/types.js';
export type { TierOptions } from './engine/tier/options.js';
export type { TuneOptions, TuneSettings } from './engine/tier/tune.js';
export type { ChatMessage } from './model/chat-template.js';
export type { TierStats } from './engine/tier/port.js';
export type { CalibrationSnapshot } from './actors/calibration/messages.js';
