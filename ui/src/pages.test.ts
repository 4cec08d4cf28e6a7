import { describe, expect, it } from "vitest";
import { floorsHtml } from "./pages/roofline";
import { energyNotes } from "./pages/frontier";
import type { FloorView, FrontierViewRow, RooflineView } from "./types";

// A hand-made fit: t0 = 1 ms, BW_eff = 1000 GB/s, three models (no leave-one-out).
const fit: FloorView = {
  host: "vm (Xeon, 2 cores)", quant: "Q4_K_M", placement: "CPU, 2 threads",
  t0_ms: 1, t0_half95_ms: 0.25, bw_eff_gbps: 1000, bw_eff_95_gbps: [800, null], worst_loo_pct: null,
  points: [1, 2, 4].map((gb, i) => ({
    model_type: `model ${gb} GB`, gb_per_token: gb, measured_ms: 1 + gb, fit_ms: 1 + gb,
    loo_ms: null, loo_error_pct: null, achieved_pct: 40 + i, row_ids: [10 + i],
  })),
};
const view = (floors: FloorView[]): RooflineView => ({ roofs: [], points: [], decode_vs_depth: [], floors });

describe("roofline page: the per-token floor", () => {
  it("prints each fit's numbers as core gave them, dashes where none", () => {
    const html = floorsHtml(view([fit]));
    expect(html).toContain("vm (Xeon, 2 cores) · Q4_K_M · CPU, 2 threads");
    expect(html).toContain("t0 = 1.000 ms ± 0.250 (95 %) · BW_eff = 1000 GB/s (95 %: 800 – unbounded) · 3 models · worst leave-one-out error — %");
    // one row per model: GB, measured, fit, LOO (—), LOO % (—), achieved %, rows
    expect(html).toContain("<td>model 2 GB</td><td>2.000</td><td>3.000</td><td>3.000</td><td>—</td><td>—</td><td>41.0</td><td>#11</td>");
    expect(html).toContain('aria-label="per-token floor Q4_K_M"');
    expect(html).not.toMatch(/NaN|undefined|Infinity/);
  });
  it("says why there is no fit", () => {
    expect(floorsHtml(view([]))).toContain("No floor fitted: —");
  });
});

describe("frontier page: energy", () => {
  const row = (run_id: number, j: number | null, note: string): FrontierViewRow => ({
    run_id, host: "vm", model: "m.gguf", quant: "Q4_K_M", decode_tps: 50, decode_ceiling_tps: 90, prefill_tps: 300,
    decode_j_per_token: j, decode_tokens_per_wh: j === null ? null : 3600 / j, decode_energy_note: note, quality: [],
  });
  it("lists each reason once with the runs it covers, and nothing for measured rows", () => {
    const html = energyNotes([
      row(3, null, "row #5: RAPL not readable here"),
      row(2, null, "row #4: RAPL not readable here"),
      row(1, 2.0, "row #1: NVML GPU"),
    ]);
    expect(html).toContain("<li>runs 3, 2: RAPL not readable here</li>");
    expect(html).not.toContain("NVML");
    expect(energyNotes([row(1, 2.0, "row #1: NVML GPU")])).toBe("");
  });
});
