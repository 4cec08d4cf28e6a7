import { api } from "../ipc";
import { esc, num } from "../format";
import type { RooflineView } from "../types";
import { floorSvg, rooflineSvg } from "../plot";
import { chartInto, exportBar } from "./common";

export async function rooflinePage(root: HTMLElement) {
  const runs = (await api.runs()).filter((r) => r.n_bench_rows > 0);
  root.innerHTML = `
    <h1>Roofline</h1>
    <div class="row"><label>Rows from <select id="run"><option value="">all stored runs</option>
      ${runs.map((r) => `<option value="${r.id}">run ${r.id} · ${esc(r.models)} · ${esc(r.started_at)}</option>`).join("")}</select></label></div>
    <div id="summary" class="muted"></div>
    <div id="plot"></div>
    <div id="prov" class="prov muted">Hover or focus a point to see its provenance row.</div>
    <div id="rexp"></div>
    <h2>Per-token floor: t = t0 + bytes ÷ BW_eff</h2>
    <div id="floors"></div>
    <h2>Decode vs depth, with its ceiling</h2>
    <div id="dvd" class="chart-img"></div>
    <div id="dexp"></div>`;
  const sel = root.querySelector("#run") as HTMLSelectElement;
  const runId = () => (sel.value === "" ? null : Number(sel.value));
  exportBar(root.querySelector("#rexp") as HTMLElement, "roofline", runId, "roofline");
  exportBar(root.querySelector("#dexp") as HTMLElement, "decode_vs_depth", runId, "decode_vs_depth");
  const draw = async () => {
    const v = await api.roofline(runId());
    const summary = root.querySelector("#summary") as HTMLElement;
    summary.innerHTML = v.roofs.length === 0 ? "No rows stored: —" : v.roofs.map((rf) => {
      const n = v.points.filter((p) => v.roofs[p.roof] === rf).length;
      return `<div class="roof-sum">${esc(rf.label)}: ` + (rf.bandwidth_gbps === null ? "no bandwidth stored (—)" :
        `STREAM ${num(rf.bandwidth_gbps)} GB/s · ${esc(rf.peak_kind || "compute")} peak ${num(rf.peak_gflops, 0)} GFLOP/s · ridge ${num(rf.ridge)} FLOP/byte`) +
        ` · ${n} points (● tg, ▲ pp)</div>`;
    }).join("");
    const plot = root.querySelector("#plot") as HTMLElement;
    plot.innerHTML = rooflineSvg(v);
    const prov = root.querySelector("#prov") as HTMLElement;
    plot.querySelectorAll(".pt").forEach((g) => {
      const showProv = () => {
        plot.querySelectorAll(".pt.sel").forEach((x) => x.classList.remove("sel"));
        g.classList.add("sel");
        const p = v.points[Number((g as HTMLElement).dataset.i)];
        prov.classList.remove("muted");
        prov.textContent = `${p.provenance} · achieved ${num(p.achieved_gflops)} of ${num(p.attainable_gflops)} GFLOP/s attainable at ${num(p.intensity, 2)} FLOP/byte`;
      };
      g.addEventListener("mouseenter", showProv);
      g.addEventListener("focus", showProv);
    });
    (root.querySelector("#floors") as HTMLElement).innerHTML = floorsHtml(v);
    await chartInto(root.querySelector("#dvd") as HTMLElement, "decode_vs_depth", runId());
  };
  sel.addEventListener("change", draw);
  await draw();
}

/** One block per fitted floor: its summary, its chart and its points with leave-one-out errors. */
export function floorsHtml(v: RooflineView): string {
  if (v.floors.length === 0) {
    return `<p class="muted">No floor fitted: — (a fit needs batch-1, depth-0 decode rows of three or more models of one weight format on one machine and placement).</p>`;
  }
  return v.floors.map((f) => {
    const hi = f.bw_eff_95_gbps[1] === null ? "unbounded" : num(f.bw_eff_95_gbps[1], 0);
    const rows = f.points.map((p) => `<tr><td>${esc(p.model_type)}</td><td>${num(p.gb_per_token, 3)}</td><td>${num(p.measured_ms, 3)}</td>` +
      `<td>${num(p.fit_ms, 3)}</td><td>${num(p.loo_ms, 3)}</td><td>${num(p.loo_error_pct, 1)}</td><td>${num(p.achieved_pct, 1)}</td><td>${p.row_ids.map((i) => "#" + i).join(", ")}</td></tr>`).join("");
    return `<div class="floor-fit"><h3>${esc(f.host)} · ${esc(f.quant)} · ${esc(f.placement)}</h3>
      <p class="floor-sum">t0 = ${num(f.t0_ms, 3)} ms ± ${num(f.t0_half95_ms, 3)} (95 %) · BW_eff = ${num(f.bw_eff_gbps, 0)} GB/s (95 %: ${num(f.bw_eff_95_gbps[0], 0)} – ${hi}) · ${f.points.length} models · worst leave-one-out error ${num(f.worst_loo_pct, 1)} %</p>
      ${floorSvg(f)}
      <table class="floor-points"><thead><tr><th>model</th><th>GB per token</th><th>measured ms/token</th><th>fit ms/token</th><th>leave-one-out ms/token</th><th>LOO error %</th><th>achieved % of STREAM ceiling</th><th>rows</th></tr></thead><tbody>${rows}</tbody></table></div>`;
  }).join("");
}
