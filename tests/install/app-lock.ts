/**
 * A lockfile for a fresh app that depends on the packed tarball, derived from the repository's own
 * package-lock.json: moetier's production dependencies, transitively, with the versions, tarball
 * URLs and integrity the repository installed. With it, `npm ci --offline` installs the app from
 * the local npm cache alone (`npm ci` in the repository put those tarballs there); without it npm
 * would need the registry's package documents to resolve version ranges, which it never cached.
 */
import { readFileSync } from 'node:fs';

interface LockEntry {
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  [key: string]: unknown;
}

export function appLockfile(
  repoLockFile: string,
  tarball: { spec: string; integrity: string },
  pkg: LockEntry,
): object {
  const lock = JSON.parse(readFileSync(repoLockFile, 'utf8')) as { packages: Record<string, LockEntry> };
  const packages: Record<string, LockEntry> = {};
  // Node's lookup: the dependency's own node_modules first, then each folder above it.
  const resolve = (from: string, name: string): string | undefined => {
    for (let at = from; ; at = at.slice(0, Math.max(0, at.lastIndexOf('/node_modules/')))) {
      const candidate = at === '' ? `node_modules/${name}` : `${at}/node_modules/${name}`;
      if (lock.packages[candidate]) return candidate;
      if (at === '') return undefined;
    }
  };
  const visit = (from: string, deps: Record<string, string> | undefined) => {
    for (const name of Object.keys(deps ?? {})) {
      const at = resolve(from, name);
      if (!at || packages[at]) continue;
      const { dev: _dev, devOptional: _devOptional, ...entry } = lock.packages[at];
      packages[at] = entry;
      visit(at, { ...entry.dependencies, ...entry.optionalDependencies });
    }
  };
  visit('', pkg.dependencies);
  return {
    name: 'app',
    lockfileVersion: 3,
    requires: true,
    packages: {
      '': { name: 'app', dependencies: { moetier: tarball.spec } },
      'node_modules/moetier': { ...pkg, resolved: tarball.spec, integrity: tarball.integrity, hasInstallScript: true },
      ...packages,
    },
  };
}
