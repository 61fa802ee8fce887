/**
 * Read bandwidth with a given number of threads: what bounds decode, which streams weights once.
 * Measured by the native binding's loop (the same kind of code that reads the weights).
 */
import { BenchSetupError } from './errors.mjs';
import { importDist } from './moetier.mjs';

/** -> { bytesPerS, source } */
export async function measureReadBandwidth(bytes, threads) {
  const { loadNative } = await importDist('src/native/binding.js');
  const native = loadNative();
  if (typeof native.measureReadBandwidth !== 'function') {
    throw new BenchSetupError(
      'the native addon has no measureReadBandwidth verb',
      'rebuild it: `npm run build:native`',
    );
  }
  // The verb reports GB/s (1e9 B/s).
  return { bytesPerS: native.measureReadBandwidth(bytes, threads) * 1e9, source: 'native measureReadBandwidth' };
}
