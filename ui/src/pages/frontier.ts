import { api } from "../ipc";
import { esc, num } from "../format";
import type { FrontierViewRow } from "../types";

export async function frontierPage(root: HTMLElement) {
  const v = await api.frontier();
  const q = v.measures;
  root.innerHTML = `
    <h1>Frontier</h1>
    <p class="muted">One row per stored run: speed from its benchmark rows (depth 0, one sequence), quality from its
      frontier cells (<code>memwall frontier</code>), newest run first. Runs are never merged or maximised.
      A dash means not measured: nothing here is estimated.</p>
    ${v.rows.length === 0 ? `<p class="muted">Nothing stored yet.</p>` : `
    <table id="frontier"><thead><tr><th>run</th><th>host</th><th>model</th><th>quant</th><th>decode tok/s</th><th>ceiling tok/s</th><th>prefill tok/s</th><th>tg J/token</th><th>tg tokens/Wh</th>
      ${q.length ? q.map((m) => `<th>${esc(m)}</th>`).join("") : "<th>quality (PPL / accuracy)</th>"}</tr></thead><tbody>
    ${v.rows.map((r) => `<tr><td class="n">${r.run_id}</td><td>${esc(r.host)}</td><td>${esc(r.model)}</td><td>${esc(r.quant)}</td><td class="n">${num(r.decode_tps)}</td>
      <td class="n">${num(r.decode_ceiling_tps)}</td><td class="n">${num(r.prefill_tps)}</td>
      <td class="n" title="${esc(r.decode_energy_note)}">${num(r.decode_j_per_token, 3)}</td><td class="n" title="${esc(r.decode_energy_note)}">${num(r.decode_tokens_per_wh, 0)}</td>
      ${q.length ? r.quality.map((x, i) => `<td class="n">${q[i].startsWith("task:") && x !== null ? num(x * 100, 1) + "%" : num(x, 3)}</td>`).join("") : `<td class="n">—</td>`}</tr>`).join("")}
    </tbody></table>
    ${energyNotes(v.rows)}`}`;
}

/** Why each J/token dash is a dash, once per reason (the rows it covers listed). */
export function energyNotes(rows: FrontierViewRow[]): string {
  const why = new Map<string, number[]>();
  for (const r of rows) {
    if (r.decode_j_per_token !== null || r.decode_tps === null) continue;
    const reason = r.decode_energy_note.replace(/^row #\d+: /, "");
    why.set(reason, [...(why.get(reason) ?? []), r.run_id]);
  }
  if (why.size === 0) return "";
  return `<div class="muted energy-why"><p>tg J/token not measured:</p><ul>${[...why].map(([reason, runs]) =>
    `<li>run${runs.length > 1 ? "s" : ""} ${[...new Set(runs)].join(", ")}: ${esc(reason)}</li>`).join("")}</ul></div>`;
}
