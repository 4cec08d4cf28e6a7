// A small log-log scatter for the Roofline page: it only maps core's numbers to
// pixels (the roof polyline and every point come from memwall-core's RooflineView).
import type { FloorView, RooflineView } from "./types";
import { esc } from "./format";

export interface Scale { d0: number; d1: number; r0: number; r1: number }

/** Log10 mapping of [d0, d1] onto [r0, r1]. */
export function logMap(s: Scale, v: number): number {
  const t = (Math.log10(v) - Math.log10(s.d0)) / (Math.log10(s.d1) - Math.log10(s.d0));
  return s.r0 + t * (s.r1 - s.r0);
}

/** Powers of ten covering [d0, d1]. */
export function decades(d0: number, d1: number): number[] {
  const out: number[] = [];
  for (let e = Math.floor(Math.log10(d0)); e <= Math.ceil(Math.log10(d1)); e++) out.push(10 ** e);
  return out.filter((v) => v >= d0 / 1.0001 && v <= d1 * 1.0001);
}

const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];

export function rooflineSvg(v: RooflineView, w = 760, h = 440): string {
  if (v.points.length === 0) return `<p class="muted">No measured points yet: run a benchmark first.</p>`;
  const roofPts = v.roofs.flatMap((r) => r.roof);
  const xs = [...v.points.map((p) => p.intensity), ...roofPts.map((r) => r[0])];
  const ys = [...v.points.map((p) => p.achieved_gflops), ...roofPts.map((r) => r[1])];
  const pad = { l: 64, r: 16, t: 16, b: 44 };
  const sx: Scale = { d0: Math.min(...xs) / 2, d1: Math.max(...xs) * 2, r0: pad.l, r1: w - pad.r };
  const sy: Scale = { d0: Math.min(...ys) / 2, d1: Math.max(...ys) * 2, r0: h - pad.b, r1: pad.t };
  const parts: string[] = [`<svg class="plot" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img" aria-label="roofline">`];
  for (const t of decades(sx.d0, sx.d1)) {
    const x = logMap(sx, t);
    parts.push(`<line x1="${x}" x2="${x}" y1="${pad.t}" y2="${h - pad.b}" class="grid"/><text x="${x}" y="${h - pad.b + 16}" class="tick" text-anchor="middle">${t}</text>`);
  }
  for (const t of decades(sy.d0, sy.d1)) {
    const y = logMap(sy, t);
    parts.push(`<line x1="${pad.l}" x2="${w - pad.r}" y1="${y}" y2="${y}" class="grid"/><text x="${pad.l - 6}" y="${y + 4}" class="tick" text-anchor="end">${t}</text>`);
  }
  parts.push(`<text x="${(pad.l + w - pad.r) / 2}" y="${h - 6}" text-anchor="middle" class="axis">arithmetic intensity (FLOP/byte)</text>`);
  parts.push(`<text transform="translate(14 ${(pad.t + h - pad.b) / 2}) rotate(-90)" text-anchor="middle" class="axis">GFLOP/s</text>`);
  v.roofs.forEach((rf, k) => {
    if (rf.roof.length < 2) return;
    const d = rf.roof.map((r, i) => `${i ? "L" : "M"}${logMap(sx, r[0]).toFixed(1)},${logMap(sy, r[1]).toFixed(1)}`).join(" ");
    parts.push(`<path d="${d}" class="roof roof-${k}" data-roof="${k}"><title>${esc(rf.label)}</title></path>`);
    const [lx, ly] = rf.roof[rf.roof.length - 1];
    parts.push(`<text x="${(logMap(sx, lx) - 4).toFixed(1)}" y="${(logMap(sy, ly) - 6).toFixed(1)}" class="tick roof-label" text-anchor="end">${esc(rf.label)}</text>`);
  });
  const series = [...new Set(v.points.map((p) => p.series))].sort();
  v.points.forEach((p, i) => {
    const c = COLORS[series.indexOf(p.series) % COLORS.length];
    const x = logMap(sx, p.intensity), y = logMap(sy, p.achieved_gflops);
    const shape = p.phase === "tg"
      ? `<circle cx="${x}" cy="${y}" r="6" fill="${c}"/>`
      : `<path d="M${x},${y - 7} L${x + 7},${y + 6} L${x - 7},${y + 6} Z" fill="${c}"/>`;
    parts.push(`<g class="pt" data-i="${i}" tabindex="0"><title>${esc(p.provenance)}</title>${shape}</g>`);
  });
  parts.push(`</svg>`);
  return parts.join("");
}

/** Linear mapping of [d0, d1] onto [r0, r1]. */
export function linMap(s: Scale, v: number): number {
  return s.r0 + ((v - s.d0) / (s.d1 - s.d0)) * (s.r1 - s.r0);
}

/**
 * One per-token floor: measured ms/token against GB per token (one dot per model)
 * and the fitted line t = t0 + bytes ÷ BW_eff from zero bytes, both from core's
 * FloorView (no number is computed here but the pixel positions).
 */
export function floorSvg(f: FloorView, w = 520, h = 300): string {
  const pad = { l: 56, r: 16, t: 16, b: 44 };
  const gbMax = Math.max(...f.points.map((p) => p.gb_per_token)) * 1.1;
  const msMax = Math.max(...f.points.flatMap((p) => [p.measured_ms, p.fit_ms])) * 1.15;
  const sx: Scale = { d0: 0, d1: gbMax, r0: pad.l, r1: w - pad.r };
  const sy: Scale = { d0: 0, d1: msMax, r0: h - pad.b, r1: pad.t };
  const parts: string[] = [`<svg class="plot floor" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img" aria-label="per-token floor ${esc(f.quant)}">`];
  for (let i = 0; i <= 4; i++) {
    const gx = (gbMax * i) / 4, gy = (msMax * i) / 4;
    const x = linMap(sx, gx), y = linMap(sy, gy);
    parts.push(`<line x1="${x}" x2="${x}" y1="${pad.t}" y2="${h - pad.b}" class="grid"/><text x="${x}" y="${h - pad.b + 16}" class="tick" text-anchor="middle">${gx.toPrecision(3)}</text>`);
    parts.push(`<line x1="${pad.l}" x2="${w - pad.r}" y1="${y}" y2="${y}" class="grid"/><text x="${pad.l - 6}" y="${y + 4}" class="tick" text-anchor="end">${gy.toPrecision(3)}</text>`);
  }
  parts.push(`<text x="${(pad.l + w - pad.r) / 2}" y="${h - 6}" text-anchor="middle" class="axis">GB read per token</text>`);
  parts.push(`<text transform="translate(14 ${(pad.t + h - pad.b) / 2}) rotate(-90)" text-anchor="middle" class="axis">ms per token</text>`);
  // The fit at 0 bytes is t0; at gbMax it is t0 + gbMax / BW_eff, read off the points'
  // own fitted values (a straight line through them).
  const [a, b] = [f.points[0], f.points[f.points.length - 1]];
  const slope = (b.fit_ms - a.fit_ms) / (b.gb_per_token - a.gb_per_token);
  const yAt = (gb: number) => a.fit_ms + slope * (gb - a.gb_per_token);
  parts.push(`<path d="M${linMap(sx, 0).toFixed(1)},${linMap(sy, yAt(0)).toFixed(1)} L${linMap(sx, gbMax).toFixed(1)},${linMap(sy, yAt(gbMax)).toFixed(1)}" class="fit-line"><title>t = t0 + bytes ÷ BW_eff</title></path>`);
  f.points.forEach((p) => {
    const x = linMap(sx, p.gb_per_token), y = linMap(sy, p.measured_ms);
    parts.push(`<g class="pt"><title>${esc(p.model_type)}: ${p.measured_ms.toFixed(3)} ms measured, ${p.fit_ms.toFixed(3)} ms fitted · rows ${p.row_ids.join(", ")}</title><circle cx="${x}" cy="${y}" r="5" fill="${COLORS[0]}"/></g>`);
  });
  parts.push(`</svg>`);
  return parts.join("");
}
