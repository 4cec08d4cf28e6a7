import { api, errText } from "../ipc";
import { esc } from "../format";
import type { AppChart } from "../types";

export function h(html: string): string { return html; }

/** Export buttons under a chart: PNG and SVG (plotters, in Rust) and the rows as CSV/JSON. */
export function exportBar(root: HTMLElement, chart: AppChart, runId: () => number | null, stem: string) {
  const bar = document.createElement("div");
  bar.className = "row exports";
  bar.innerHTML = `<span class="muted">Export:</span>
    <button data-x="png">PNG</button><button data-x="svg">SVG</button>
    <button data-x="csv">CSV</button><button data-x="json">JSON</button><span class="out"></span>`;
  const out = bar.querySelector(".out") as HTMLElement;
  bar.querySelectorAll("button").forEach((b) =>
    b.addEventListener("click", async () => {
      const ext = (b as HTMLElement).dataset.x!;
      const name = `${stem}${runId() === null ? "" : "-run" + runId()}.${ext}`;
      try {
        const r = ext === "png" || ext === "svg" ? await api.exportChart(chart, runId(), name) : await api.exportRows(runId(), name);
        out.innerHTML = `wrote <code class="exported">${esc(r.path)}</code> (${r.bytes} bytes)`;
      } catch (e) {
        out.innerHTML = `<span class="error">${esc(errText(e))}</span>`;
      }
    }),
  );
  root.appendChild(bar);
}

export async function chartInto(el: HTMLElement, chart: AppChart, runId: number | null) {
  try {
    el.innerHTML = await api.chartSvg(chart, runId);
  } catch (e) {
    el.innerHTML = `<p class="muted">${esc(errText(e))}</p>`;
  }
}
