/**
 * A small SVG line chart of our own: hit rate (y, 0..1) against budget (x), one
 * polyline per series, axes with ticks and a legend. No dependency.
 */
export interface Series {
  label: string;
  points: readonly { x: number; y: number }[];
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
}

const palette = [
  '#1f77b4',
  '#ff7f0e',
  '#2ca02c',
  '#d62728',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#bcbd22',
  '#17becf',
];
const size = { w: 720, h: 420, left: 60, right: 170, top: 40, bottom: 50 };

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

export function lineChartSvg(series: readonly Series[], o: ChartOptions): string {
  const xs = [...new Set(series.flatMap((s) => s.points.map((p) => p.x)))].sort((a, b) => a - b);
  const xMin = xs[0] ?? 0;
  const xMax = xs.length > 1 ? xs[xs.length - 1] : xMin + 1;
  const plotW = size.w - size.left - size.right;
  const plotH = size.h - size.top - size.bottom;
  const px = (x: number): number => size.left + ((x - xMin) / (xMax - xMin)) * plotW;
  const py = (y: number): number => size.top + (1 - y) * plotH;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${size.w}" height="${size.h}" viewBox="0 0 ${size.w} ${size.h}" font-family="sans-serif" font-size="12">`,
    `<rect width="${size.w}" height="${size.h}" fill="white"/>`,
    `<text x="${size.w / 2}" y="22" text-anchor="middle" font-size="14">${esc(o.title)}</text>`,
  ];
  for (let i = 0; i <= 10; i += 2) {
    const y = py(i / 10);
    parts.push(
      `<line x1="${size.left}" y1="${y}" x2="${size.left + plotW}" y2="${y}" stroke="#ddd"/>`,
      `<text x="${size.left - 6}" y="${y + 4}" text-anchor="end">${(i / 10).toFixed(1)}</text>`,
    );
  }
  for (const x of xs) {
    parts.push(
      `<line x1="${px(x)}" y1="${size.top + plotH}" x2="${px(x)}" y2="${size.top + plotH + 5}" stroke="black"/>`,
      `<text x="${px(x)}" y="${size.top + plotH + 18}" text-anchor="middle">${x}</text>`,
    );
  }
  parts.push(
    `<line x1="${size.left}" y1="${size.top}" x2="${size.left}" y2="${size.top + plotH}" stroke="black"/>`,
    `<line x1="${size.left}" y1="${size.top + plotH}" x2="${size.left + plotW}" y2="${size.top + plotH}" stroke="black"/>`,
    `<text x="${size.left + plotW / 2}" y="${size.h - 12}" text-anchor="middle">${esc(o.xLabel)}</text>`,
    `<text x="16" y="${size.top + plotH / 2}" text-anchor="middle" transform="rotate(-90 16 ${size.top + plotH / 2})">${esc(o.yLabel)}</text>`,
  );
  series.forEach((s, i) => {
    const color = palette[i % palette.length];
    const pts = [...s.points].sort((a, b) => a.x - b.x).map((p) => `${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`);
    parts.push(
      `<polyline data-series="${esc(s.label)}" fill="none" stroke="${color}" stroke-width="2" points="${pts.join(' ')}"/>`,
    );
    for (const p of pts) {
      const [cx, cy] = p.split(',');
      parts.push(`<circle cx="${cx}" cy="${cy}" r="3" fill="${color}"/>`);
    }
    const ly = size.top + 10 + i * 18;
    const lx = size.left + plotW + 16;
    parts.push(
      `<line x1="${lx}" y1="${ly}" x2="${lx + 20}" y2="${ly}" stroke="${color}" stroke-width="2"/>`,
      `<text x="${lx + 26}" y="${ly + 4}">${esc(s.label)}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
