// Display formatting only: core computes every figure; these functions print them.
// A missing or non-finite value prints as an em dash, never as 0.

export const DASH = "—";

export function num(v: number | null | undefined, decimals = 1): string {
  return typeof v === "number" && Number.isFinite(v) ? v.toFixed(decimals) : DASH;
}

export function meanStd(mean: number | null | undefined, std: number | null | undefined, d = 1): string {
  if (typeof mean !== "number" || !Number.isFinite(mean)) return DASH;
  return typeof std === "number" && Number.isFinite(std) ? `${mean.toFixed(d)} ± ${std.toFixed(d)}` : mean.toFixed(d);
}

/** A ratio (0..1) as a percentage. */
export function pct(ratio: number | null | undefined, d = 0): string {
  return typeof ratio === "number" && Number.isFinite(ratio) ? `${(ratio * 100).toFixed(d)}%` : DASH;
}

/** Bytes with both bases named, like core's `Bytes` Display. */
export function bytes(b: number | null | undefined): string {
  if (typeof b !== "number" || !Number.isFinite(b)) return DASH;
  if (b >= 1e8) return `${(b / 1e9).toFixed(2)} GB (${(b / 2 ** 30).toFixed(2)} GiB)`;
  return `${(b / 1e6).toFixed(1)} MB (${(b / 2 ** 20).toFixed(1)} MiB)`;
}

/**
 * Parses a comma/space separated list of positive integers (`"512, 1024"`).
 * Returns an error message naming the bad item instead of guessing.
 */
export function parseList(text: string, field: string, allowEmpty = true): number[] | string {
  const items = text.split(/[\s,]+/).filter((s) => s.length > 0);
  if (items.length === 0) return allowEmpty ? [] : `${field}: give at least one value`;
  const out: number[] = [];
  for (const it of items) {
    if (!/^\d+$/.test(it)) return `${field}: "${it}" is not a whole number`;
    const n = Number(it);
    if (n <= 0 && field !== "depths") return `${field}: values must be positive`;
    out.push(n);
  }
  return out;
}

/** Escapes text for innerHTML. */
export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}
