/** The numbers TypeScript and the addon share are defined in C, exported, and checked at load. */
import { describe, expect, it } from 'vitest';
import { loadNative } from '../../src/native/binding.js';
import { constantMismatches, expectedNativeConstants, LAYER_STAT_FIELDS } from '../../src/native/constants.js';
import { STEP_LAYER_FIELDS } from '../../src/actors/calibration/messages.js';

describe('shared constants', () => {
  it('the addon exports the values TypeScript uses', () => {
    const native = loadNative();
    expect(native.constants).toEqual(expectedNativeConstants);
    expect(constantMismatches(native.constants)).toEqual([]);
    expect(STEP_LAYER_FIELDS).toBe(LAYER_STAT_FIELDS); // one owner: the calibration reads the same fact
  });
  it('a stale addon is named field by field', () => {
    expect(constantMismatches({ ...expectedNativeConstants, layerStatsFields: 7 })).toEqual([
      `layerStatsFields: addon 7, TypeScript ${LAYER_STAT_FIELDS}`,
    ]);
    expect(constantMismatches(undefined)).toHaveLength(Object.keys(expectedNativeConstants).length);
  });
});
