/**
 * Where moetier keeps what it can rebuild (generated models, heat files): in the user's cache,
 * never inside the package, so an install in a read-only node_modules works and a reinstall
 * keeps the cache. The XDG base-directory order:
 *
 *   MOETIER_CACHE_DIR  ->  $XDG_CACHE_HOME/moetier  ->  ~/.cache/moetier
 *
 * Layout: generated models at the top, heat files under heat/ (heat-file.ts).
 */
import { homedir } from 'node:os';
import path from 'node:path';

export function cacheDir(env: NodeJS.ProcessEnv = process.env, home: string = homedir()): string {
  const own = env.MOETIER_CACHE_DIR;
  if (own !== undefined && own.length > 0) return path.resolve(own);
  // The spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
  const xdg = env.XDG_CACHE_HOME;
  if (xdg !== undefined && path.isAbsolute(xdg)) return path.join(xdg, 'moetier');
  return path.join(home, '.cache', 'moetier');
}
