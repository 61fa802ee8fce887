/**
 * The live dashboard (GET /dashboard): one page, no build step, fed by GET /events (SSE: each tier
 * step's layer windows and transfers, calibration snapshots, and counters twice a second). It draws
 * per layer the compute of the last steps and, on the same row, the uploads and reads that
 * overlapped them, so layer L's swaps show beside the compute of L + 1 and later. window.dashboard
 * holds what it counted (a test reads it).
 */
export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>moetier: live</title>
<style>
  body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; }
  #counters { display: grid; grid-template-columns: repeat(4, max-content); gap: 4px 24px; margin-bottom: 12px; }
  #counters b { font-variant-numeric: tabular-nums; }
  canvas { border: 1px solid #ccc; width: 100%; height: 320px; }
  .legend span { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; }
  pre { background: #f6f6f6; padding: 8px; max-height: 200px; overflow: auto; }
</style>
</head>
<body>
<h2>moetier: <span id="model"></span></h2>
<div id="counters">
  <div>steps seen <b id="steps">0</b></div>
  <div>tokens generated <b id="tokens">0</b></div>
  <div>tok/s (aggregate) <b id="rate">0</b></div>
  <div>tok/s per stream <b id="perStream">-</b></div>
  <div>queue depth <b id="queue">0</b></div>
  <div>active sequences <b id="active">0</b></div>
  <div>decode hit rate <b id="hit">-</b></div>
  <div>gate bytes in flight <b id="inflight">0</b></div>
  <div>transfers seen <b id="transfers">0</b></div>
</div>
<div class="legend">per layer, the last steps on the wall clock:<span style="background:#4a7fd0"></span>compute<span style="background:#e8913a"></span>upload / read</div>
<canvas id="timeline" width="1200" height="320"></canvas>
<h3>tune settings</h3>
<pre id="tune">-</pre>
<h3>calibration</h3>
<pre id="calibration">-</pre>
<script>
// State the page shows (and a test reads): the steps and transfers seen, the counters.
const state = (window.dashboard = { steps: 0, transfers: 0, bars: 0, tokens: 0, recent: [] });
const $ = (id) => document.getElementById(id);
const canvas = $('timeline');
const ctx = canvas.getContext('2d');
let lastTokens = 0, lastAt = performance.now();

function draw() {
  const recent = state.recent;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  if (recent.length === 0) return;
  const layers = Math.max(...recent.map((s) => s.layers.length));
  const t0 = Math.min(...recent.flatMap((s) => s.layers.map((l) => l.startMs)));
  const t1 = Math.max(...recent.flatMap((s) => [...s.layers.map((l) => l.endMs), ...s.transfers.map((t) => t.endMs)]));
  const x = (ms) => 40 + ((ms - t0) / Math.max(1e-6, t1 - t0)) * (canvas.width - 50);
  const rowH = (canvas.height - 20) / Math.max(1, layers);
  let bars = 0;
  ctx.font = '10px sans-serif';
  for (let l = 0; l < layers; l++) { ctx.fillStyle = '#666'; ctx.fillText('L' + l, 4, 14 + l * rowH + rowH / 2); }
  for (const s of recent) {
    for (const l of s.layers) {
      ctx.fillStyle = '#4a7fd0';
      ctx.fillRect(x(l.startMs), 10 + l.layer * rowH, Math.max(1, x(l.endMs) - x(l.startMs)), rowH * 0.45);
      bars++;
    }
    for (const t of s.transfers) {
      ctx.fillStyle = '#e8913a';
      ctx.fillRect(x(t.startMs), 10 + t.layer * rowH + rowH * 0.5, Math.max(1, x(t.endMs) - x(t.startMs)), rowH * 0.4);
      bars++;
    }
  }
  state.bars = bars;
}

const events = new EventSource('events');
events.addEventListener('hello', (e) => { $('model').textContent = JSON.parse(e.data).model; });
events.addEventListener('step', (e) => {
  const s = JSON.parse(e.data);
  state.steps++;
  state.transfers += s.transfers.length;
  state.recent.push(s);
  if (state.recent.length > 16) state.recent.shift();
  $('steps').textContent = state.steps;
  $('transfers').textContent = state.transfers;
  draw();
});
events.addEventListener('calibration', (e) => { $('calibration').textContent = JSON.stringify(JSON.parse(e.data), null, 1); });
events.addEventListener('counters', (e) => {
  const c = JSON.parse(e.data);
  const now = performance.now();
  state.tokens = c.generatedTokens;
  $('tokens').textContent = c.generatedTokens;
  const rate = (c.generatedTokens - lastTokens) / ((now - lastAt) / 1000);
  $('rate').textContent = rate.toFixed(1);
  // The running sequences share the steps: each gets the aggregate's share.
  $('perStream').textContent = c.active > 0 ? (rate / c.active).toFixed(1) : '-';
  lastTokens = c.generatedTokens; lastAt = now;
  $('queue').textContent = c.queueDepth;
  $('active').textContent = c.active;
  $('hit').textContent = c.decodeHitRate === null ? '-' : (100 * c.decodeHitRate).toFixed(1) + ' %';
  $('inflight').textContent = c.inflightBytes;
  $('tune').textContent = JSON.stringify(c.tune, null, 1);
});
</script>
</body>
</html>
`;
