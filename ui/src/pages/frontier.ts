import { api } from "../ipc";
import { esc, num } from "../format";

export async function frontierPage(root: HTMLElement) {
  const v = await api.frontier();
  const q = v.measures;
  root.innerHTML = `
    <h1>Frontier</h1>
    <p class="muted">One row per stored run: speed from its benchmark rows (depth 0, one sequence), quality from its
      frontier cells (<code>memwall frontier</code>), newest run first. Runs are never merged or maximised.
      A dash means not measured: nothing here is estimated.</p>
    ${v.rows.length === 0 ? `<p class="muted">Nothing stored yet.</p>` : `
    <table id="frontier"><thead><tr><th>run</th><th>host</th><th>model</th><th>quant</th><th>decode tok/s</th><th>ceiling tok/s</th><th>prefill tok/s</th>
      ${q.length ? q.map((m) => `<th>${esc(m)}</th>`).join("") : "<th>quality (PPL / accuracy)</th>"}</tr></thead><tbody>
    ${v.rows.map((r) => `<tr><td class="n">${r.run_id}</td><td>${esc(r.host)}</td><td>${esc(r.model)}</td><td>${esc(r.quant)}</td><td class="n">${num(r.decode_tps)}</td>
      <td class="n">${num(r.decode_ceiling_tps)}</td><td class="n">${num(r.prefill_tps)}</td>
      ${q.length ? r.quality.map((x, i) => `<td class="n">${q[i].startsWith("task:") && x !== null ? num(x * 100, 1) + "%" : num(x, 3)}</td>`).join("") : `<td class="n">—</td>`}</tr>`).join("")}
    </tbody></table>`}`;
}
