/**
 * The memory this process may still fill: the kernel's MemAvailable (os.freemem on Node 20, which
 * counts reclaimable page cache), capped by a cgroup's limit where one applies (Node reads it).
 * One owner for the figure that `--memory-budget auto` and the engine's model preload size themselves by.
 */
import os from 'node:os';

export function availableMemoryBytes(): number {
  const constrained = process.constrainedMemory?.() ?? 0;
  return constrained > 0 ? Math.min(os.freemem(), constrained) : os.freemem();
}
