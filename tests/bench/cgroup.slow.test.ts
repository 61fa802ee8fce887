/**
 * The bench's memory cgroup (bench/lib/cgroup.mjs): a child run inside it is charged to it (its
 * peak seen), and one that goes past the limit is killed, as an engine bigger than its limit
 * would be. Needs root and the v1 memory controller; skipped (and says why) elsewhere.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: bench/lib is plain JavaScript without declarations
import { cgroupCommand, createMemoryCgroup, memoryCgroupSupport } from '../../bench/lib/cgroup.mjs';

const why: string | undefined = memoryCgroupSupport();
const MiB = 1 << 20;

describe.skipIf(why !== undefined)(`memory cgroup for benchmarks${why ? ` (skipped: ${why})` : ''}`, () => {
  it('charges a child to the group and kills one that passes the limit', () => {
    const group = createMemoryCgroup('moetier-test', 300 * MiB);
    try {
      const alloc = (mib: number) =>
        `const a = []; for (let i = 0; i < ${mib}; i++) a.push(Buffer.alloc(${MiB}, 1)); console.log('held', a.length)`;
      const [cmd, args] = cgroupCommand(group, [process.execPath, '-e', alloc(100)]);
      const ok = spawnSync(cmd, args, { encoding: 'utf8' });
      expect(ok.status, ok.stderr).toBe(0);
      expect(ok.stdout).toContain('held 100');
      expect(group.peakBytes()).toBeGreaterThan(100 * MiB);
      expect(group.peakBytes()).toBeLessThanOrEqual(300 * MiB);
      const [cmd2, args2] = cgroupCommand(group, [process.execPath, '-e', alloc(600)]);
      const over = spawnSync(cmd2, args2, { encoding: 'utf8' });
      expect(over.signal).toBe('SIGKILL');
    } finally {
      group.remove();
    }
  }, 60_000);
});
