import { api, errText } from "../ipc";
import { esc, meanStd, num } from "../format";
import { togglePick } from "../jobs";
import type { RunSummary } from "../types";

export async function historyPage(root: HTMLElement) {
  root.innerHTML = `
    <h1>History</h1>
    <div class="row">
      <label>model <input id="fmodel" placeholder="file name contains"></label>
      <label>engine <input id="fengine" placeholder="llama.cpp"></label>
      <label>since <input id="fsince" placeholder="2026-11-30"></label>
      <button id="filter">Filter</button><button id="compare" disabled>Compare 2 selected</button>
      <button id="report-open">Open report</button><button id="report-export">Export report</button>
    </div>
    <p id="herr" class="error"></p>
    <table id="runs"><thead><tr><th></th><th>run</th><th>kind</th><th>started (UTC)</th><th>models</th><th>rows</th><th>host</th><th>command</th><th></th></tr></thead><tbody></tbody></table>
    <p id="report-status" class="muted"></p>
    <div id="cmp"></div>
    <iframe id="report" title="memwall report" hidden style="width:100%;height:80vh;border:1px solid #ccc"></iframe>`;
  const $ = <T extends HTMLElement>(s: string) => root.querySelector(s) as T;
  let picked: number[] = [];
  let runs: RunSummary[] = [];
  const load = async () => {
    // Blank fields do not filter (core's RunFilter); the filtering is one store query.
    runs = await api.runs({ model: $<HTMLInputElement>("#fmodel").value, engine: $<HTMLInputElement>("#fengine").value, since: $<HTMLInputElement>("#fsince").value });
    picked = picked.filter((p) => runs.some((r) => r.id === p));
    $("#runs tbody").innerHTML = runs.map((r) => `<tr data-id="${r.id}"><td><input type="checkbox" class="pick" data-id="${r.id}" ${picked.includes(r.id) ? "checked" : ""}></td>
      <td class="n">${r.id}</td><td>${esc(r.kind)}</td><td>${esc(r.started_at)}</td><td>${esc(r.models) || "—"}</td><td class="n">${r.n_bench_rows}</td>
      <td>${esc(r.hostname)}</td><td><code>${esc(r.command)}</code></td><td><button class="del" data-id="${r.id}">Delete</button></td></tr>`).join("")
      || `<tr><td colspan="9" class="muted">No runs match.</td></tr>`;
    $<HTMLButtonElement>("#compare").disabled = picked.length !== 2;
    root.querySelectorAll(".pick").forEach((c) => c.addEventListener("change", () => {
      picked = togglePick(picked, Number((c as HTMLElement).dataset.id));
      root.querySelectorAll<HTMLInputElement>(".pick").forEach((x) => (x.checked = picked.includes(Number(x.dataset.id))));
      $<HTMLButtonElement>("#compare").disabled = picked.length !== 2;
    }));
    root.querySelectorAll(".del").forEach((b) => b.addEventListener("click", () => {
      // In-page confirmation (no native dialog plugin): the row asks before deleting.
      const id = Number((b as HTMLElement).dataset.id);
      const r = runs.find((x) => x.id === id)!;
      const cell = b.parentElement as HTMLElement;
      cell.innerHTML = `<span class="warn">Delete run ${id} (${esc(r.kind)}, ${r.n_bench_rows} rows) and all its rows?</span>
        <button class="yes" data-id="${id}">Delete</button><button class="no">Keep</button>`;
      cell.querySelector(".no")!.addEventListener("click", () => load());
      cell.querySelector(".yes")!.addEventListener("click", async () => {
        try { await api.deleteRun(id); await load(); } catch (e) { $("#herr").textContent = errText(e); }
      });
    }));
  };
  // The report is written by core's report job; the page only shows where, or its HTML.
  const report = async (show: boolean) => {
    $("#report-status").textContent = "Writing the report…";
    try {
      const r = await api.exportReport();
      $("#report-status").textContent = `Wrote ${r.files} files to ${r.dir}`;
      if (show) { const f = $<HTMLIFrameElement>("#report"); f.srcdoc = r.html; f.hidden = false; }
    } catch (e) { $("#report-status").textContent = ""; $("#herr").textContent = errText(e); }
  };
  $("#report-open").addEventListener("click", () => report(true));
  $("#report-export").addEventListener("click", () => report(false));
  $("#filter").addEventListener("click", () => load().catch((e) => ($("#herr").textContent = errText(e))));
  $("#compare").addEventListener("click", async () => {
    const [a, b] = picked;
    const rows = await api.compare(a, b);
    $("#cmp").innerHTML = `<h2>Run ${a} vs run ${b}</h2><table id="cmp-table"><thead><tr><th>model</th><th>test</th><th>threads</th><th>run ${a} tok/s</th><th>run ${b} tok/s</th><th>change</th></tr></thead><tbody>
      ${rows.map((r) => `<tr><td>${esc(r.model)}</td><td>${esc(r.test)}</td><td class="n">${r.n_threads}</td><td class="n">${r.a ? meanStd(r.a[0], r.a[1], 2) : "—"}</td>
      <td class="n">${r.b ? meanStd(r.b[0], r.b[1], 2) : "—"}</td><td class="n">${r.change_pct === null ? "—" : (r.change_pct >= 0 ? "+" : "") + num(r.change_pct) + "%"}</td></tr>`).join("")}</tbody></table>`;
  });
  await load();
}
