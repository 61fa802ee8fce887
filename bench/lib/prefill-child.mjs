/**
 * One moetier prefill measurement in a child process (bench/prefill.mjs runs it inside a memory
 * cgroup): a JSON request on stdin { model, promptIds, options, maxTokens, prefixIds? }, one JSON
 * line on stdout { tokens, ttftMs, prefillMs, prefillPath, prefillExpertReads,
 * prefillDistinctExpertsRead, fileReadBytes } with the bytes the engine read from the model file
 * during the timed request. With prefixIds, a conversation's first turn evaluates them (untimed)
 * and the timed request is its second turn over that cached prefix.
 */
import { importDist } from './moetier.mjs';

const request = JSON.parse(
  await new Promise((resolve) => {
    let text = '';
    process.stdin.on('data', (d) => (text += d)).on('end', () => resolve(text));
  }),
);
const { openEngine } = await importDist('src/engine/engine.js');
const engine = await openEngine({ model: request.model, threads: 2, heat: false, ...request.options });
try {
  const conversation = request.prefixIds ? engine.conversation() : undefined;
  if (conversation) for await (const _ of conversation.generate(request.prefixIds, { maxTokens: 1, stopAtEos: false }));
  const before = engine.fileReads()?.totalBytes ?? 0;
  const tokens = [];
  const turn = (conversation ?? engine).generate(request.promptIds, { maxTokens: request.maxTokens, stopAtEos: false });
  for await (const t of turn) tokens.push(t.id);
  const s = engine.lastStats;
  process.stdout.write(
    JSON.stringify({
      tokens,
      ttftMs: s.ttftMs,
      prefillMs: s.prefillMs,
      prefillPath: s.prefillPath ?? null,
      prefillExpertReads: s.prefillExpertReads ?? 0,
      prefillDistinctExpertsRead: s.prefillDistinctExpertsRead ?? 0,
      fileReadBytes: (engine.fileReads()?.totalBytes ?? 0) - before,
    }) + '\n',
  );
} finally {
  await engine.close();
}
