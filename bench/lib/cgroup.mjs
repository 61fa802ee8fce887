/**
 * A memory cgroup (v1) for one benchmark run: both engines run under the same limit, which counts
 * the page cache, so a model file bigger than the limit is a model bigger than RAM. Needs root and
 * the v1 memory controller mounted (CGROUP_MEMORY_ROOT, default /sys/fs/cgroup/memory); otherwise
 * memoryCgroupSupport() says why, and the bench reports that it ran without limits.
 *
 *   const g = createMemoryCgroup('moetier-disk', limitBytes)
 *   spawn(...cgroupCommand(g, [node, script, ...]))   the child joins the group before it execs
 *   g.peakBytes()                                    memory.max_usage_in_bytes since creation
 *   g.remove()                                       after the child exited
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const cgroupMemoryRoot = process.env.CGROUP_MEMORY_ROOT ?? '/sys/fs/cgroup/memory';

/** undefined when cgroups can be made here, else the reason. */
export function memoryCgroupSupport(root = cgroupMemoryRoot) {
  if (process.getuid?.() !== 0) return 'not root (run the bench as root for the memory limits)';
  if (!existsSync(path.join(root, 'memory.limit_in_bytes')))
    return `no cgroup v1 memory controller at ${root} (set CGROUP_MEMORY_ROOT)`;
  return undefined;
}

export function createMemoryCgroup(name, limitBytes, root = cgroupMemoryRoot) {
  const why = memoryCgroupSupport(root);
  if (why) throw Object.assign(new Error(`memory cgroup: ${why}`), { code: 'E_CGROUP' });
  const dir = path.join(root, `${name}-${process.pid}-${Date.now()}`);
  mkdirSync(dir);
  const file = (f) => path.join(dir, f);
  writeFileSync(file('memory.limit_in_bytes'), String(limitBytes));
  // The limit covers memory and swap alike where swap accounting exists: no escape to swap.
  if (existsSync(file('memory.memsw.limit_in_bytes')))
    writeFileSync(file('memory.memsw.limit_in_bytes'), String(limitBytes));
  return {
    dir,
    limitBytes: Number(readFileSync(file('memory.limit_in_bytes'), 'utf8')),
    peakBytes: () => Number(readFileSync(file('memory.max_usage_in_bytes'), 'utf8')),
    usageBytes: () => Number(readFileSync(file('memory.usage_in_bytes'), 'utf8')),
    /** Times the limit was hit (the kernel reclaimed or the OOM killer ran). */
    failCount: () => Number(readFileSync(file('memory.failcnt'), 'utf8')),
    /** Page cache drained into the parent, then the group removed (it must hold no process). */
    remove: () => {
      try {
        writeFileSync(file('memory.force_empty'), '0');
      } catch {
        // a group with charges that cannot move still goes away below, or stays for the admin
      }
      rmdirSync(dir);
    },
  };
}

/** [command, args] that run argv inside the group: the shell joins it, then execs argv. */
export function cgroupCommand(group, argv) {
  const quoted = argv.map((a) => `'${String(a).replaceAll("'", "'\\''")}'`).join(' ');
  return ['/bin/sh', ['-c', `echo $$ > '${path.join(group.dir, 'cgroup.procs')}' && exec ${quoted}`]];
}
