/** Every placement policy by the name `moetier replay --policy` takes. */
import type { Offload } from '../cost.js';
import type { Policy } from '../types.js';
import { admit } from './admit.js';
import { belady } from './belady.js';
import { dlfu } from './dlfu.js';
import { dlfuRecent } from './dlfu-recent.js';
import { lfru } from './lfru.js';
import { lfu } from './lfu.js';
import { lru } from './lru.js';
import { lfruGuarded, replan, replanUnguarded } from './replan.js';
import { oracleStatic, staticStart } from './static.js';

export const policies: readonly Policy[] = [
  lru,
  lfu,
  dlfu,
  dlfuRecent,
  lfru,
  lfruGuarded,
  admit,
  replan,
  replanUnguarded,
  staticStart,
  oracleStatic,
  belady,
];

export const policyNames: readonly string[] = policies.map((p) => p.name);

export function policyByName(name: string): Policy | undefined {
  return policies.find((p) => p.name === name);
}

/**
 * The engine's default placement for each offload mode, as the replay names it (src/engine/tier/options.ts
 * resolves the engine's): host-less (the disk tier, whose every miss is read) runs dlfu in the tier;
 * hosted runs LFRU with the guarded replan held in reserve (replan off, the guard on).
 */
export const engineDefaultPolicy: Readonly<Record<Offload, string>> = { hostless: 'dlfu', hosted: 'lfru-guarded' };
