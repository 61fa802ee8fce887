import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cacheDir } from '../../src/core/cache-dir.js';

describe('cache folder', () => {
  const home = '/home/ada';

  it('is MOETIER_CACHE_DIR when set, over XDG_CACHE_HOME', () => {
    expect(cacheDir({ MOETIER_CACHE_DIR: '/srv/cache', XDG_CACHE_HOME: '/xdg' }, home)).toBe('/srv/cache');
    expect(cacheDir({ MOETIER_CACHE_DIR: 'rel/c' }, home)).toBe(path.resolve('rel/c'));
  });

  it('is $XDG_CACHE_HOME/moetier next, then ~/.cache/moetier', () => {
    expect(cacheDir({ XDG_CACHE_HOME: '/xdg' }, home)).toBe('/xdg/moetier');
    expect(cacheDir({}, home)).toBe('/home/ada/.cache/moetier');
  });

  it('ignores an empty MOETIER_CACHE_DIR and a relative XDG_CACHE_HOME (the XDG spec says so)', () => {
    expect(cacheDir({ MOETIER_CACHE_DIR: '', XDG_CACHE_HOME: '/xdg' }, home)).toBe('/xdg/moetier');
    expect(cacheDir({ XDG_CACHE_HOME: 'relative' }, home)).toBe('/home/ada/.cache/moetier');
  });
});
