/** Runs tests with a clean OTEL_* environment and restores the caller's afterwards. */
export function useOtelEnv(vars: Record<string, string>): () => void {
  const saved = Object.entries(process.env).filter(([k]) => k.startsWith('OTEL_'));
  for (const [k] of saved) delete process.env[k];
  Object.assign(process.env, vars);
  return () => {
    for (const k of Object.keys(process.env)) if (k.startsWith('OTEL_')) delete process.env[k];
    for (const [k, v] of saved) process.env[k] = v;
  };
}
