/** Every placement policy by the name `moetier replay --policy` takes. */
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

export const policies: readonly Policy[] = [lru, lfu, dlfu, dlfuRecent, lfru, lfruGuarded, admit, replan, replanUnguarded, staticStart, oracleStatic, belady];

export const policyNames: readonly string[] = policies.map((p) => p.name);

export function policyByName(name: string): Policy | undefined {
  return policies.find((p) => p.name === name);
}
