import { api, errText } from "../ipc";
import { esc, num, parseList, pct } from "../format";
import { Jobs } from "../jobs";
import type { DrafterKind, GateOutcome, GateRow, JobKind, SamplingCheck, SpecProgress } from "../types";

const jobs = new Jobs();

const GATE_HEAD = `<thead><tr><th>drafter</th><th>k</th><th>identical to target-only</th><th>first difference</th></tr></thead>`;

function gateRowHtml(r: GateRow): string {
  const d = r.first_diff;
  return `<tr><td>${esc(r.drafter)}</td><td class="n">${r.k}</td><td class="n">${r.n_identical}/${r.n_prompts}</td>
    <td>${d ? esc(`prompt ${d.prompt_id}, generated position ${d.position}`) : "—"}</td></tr>`;
}

function samplingHtml(c: SamplingCheck): string {
  return `<p>sampling check (k = ${c.k}, ${c.trials} runs): χ² = ${num(c.chi2, 2)} on ${c.df} df, p = ${num(c.p_value, 3)}, critical value (α = 1e-3) ${num(c.chi2_crit, 2)}
    → <b>${c.passed ? "pass" : "FAIL"}</b>; TV ${num(c.tv, 4)} (expected ≤ ${num(c.tv_expected_max, 4)}); acceptance ${pct(c.acceptance_rate, 1)}, α̂ ${num(c.alpha_hat, 3)}; first drafted token rejected in ${c.n_first_rejected} of ${c.trials} runs</p>`;
}

function verdictHtml(o: GateOutcome): string {
  const what = o.failed.length === 0 ? `<b>passed</b>` : `<b class="error">failed</b> for ${esc(o.failed.join(", "))}`;
  const partial = o.partial ? ` · partial (${o.prompts.length} of ${o.n_prompts_set} prompts): unlocks no bench` : "";
  const stored = o.run_id === null ? "not stored" : `stored as run ${o.run_id}`;
  return `gate ${what} · target ${esc(o.target_file)}, draft ${esc(o.draft_file ?? "—")}, ${o.prompts.length} prompts, ${o.max_new} tokens each${partial} · ${stored}`;
}

function progressText(p: SpecProgress): string {
  switch (p.event) {
    case "loading": return `loading ${p.target}${p.draft ? ` and ${p.draft}` : ""}`;
    case "gate_prompt": return `gate: prompt ${p.index + 1}/${p.total} (${p.id})`;
    case "gate_done": return `gate: ${p.total} prompts done`;
    case "sampling_check": return `sampling check: ${p.trials} runs at ${p.sampling}, k = ${p.k}`;
    case "bench": return p.step;
  }
}

export async function speculativePage(root: HTMLElement) {
  const models = (await api.models()).filter((m) => m.present);
  const opts = (sel: string) => models.map((m) => `<option value="${esc(m.name)}" ${m.name === sel ? "selected" : ""}>${esc(m.name)}</option>`).join("");
  const target = models.find((m) => m.default) ?? models[models.length - 1];
  const draft = [...models].filter((m) => m.name !== target?.name).sort((a, b) => a.bytes - b.bytes)[0] ?? target;
  root.innerHTML = `
    <h1>Speculative decoding</h1>
    <p class="muted">The gate checks that speculative output equals target-only greedy output token for token on the built-in prompt set
      (and, with sampling runs, that sampling keeps the target's distribution); a passed gate over the whole set unlocks the bench.
      Fields left empty take <code>memwall spec gate</code>'s and <code>memwall spec bench</code>'s defaults.</p>
    <div class="form">
      <label>Target <select id="starget">${opts(target?.name ?? "")}</select></label>
      <label>Draft <select id="sdraft">${opts(draft?.name ?? "")}</select></label>
      <label>draft lengths (-k) <input id="sk" placeholder="default"></label>
      <label>tokens per prompt (-n) <input id="sn" placeholder="default"></label>
      <label>prompts (--limit; empty: all) <input id="slimit" placeholder="all"></label>
      <label>sampling runs (0: skip) <input id="strials" placeholder="default"></label>
      <label>bench repetitions (-r) <input id="sr" placeholder="default"></label>
      <label><span><input type="checkbox" id="dm" checked> draft model</span><span><input type="checkbox" id="ng" checked> n-gram lookup</span></label>
    </div>
    <div class="row"><button id="sgate" class="primary">Run gate</button><button id="sbench">Run bench</button><button id="scancel" disabled>Cancel</button>
      <span id="slabel" class="muted"></span></div>
    <p id="serr" class="error"></p>
    <p id="verdict"></p>
    <table id="gate-rows">${GATE_HEAD}<tbody></tbody></table>
    <div id="sampling"></div>
    <pre id="sreport"></pre>`;
  const $ = <T extends HTMLElement>(s: string) => root.querySelector(s) as T;
  if (models.length === 0) $("#serr").textContent = "No model is fetched: run `memwall models fetch`.";
  const label = $("#slabel");
  const gateBtn = $<HTMLButtonElement>("#sgate"), benchBtn = $<HTMLButtonElement>("#sbench"), cancel = $<HTMLButtonElement>("#scancel");
  let running: JobKind | null = null;
  cancel.addEventListener("click", () => running && api.cancel(running));

  /** The typed fields, or an error message naming the bad one. */
  const fields = () => {
    const one = (id: string, name: string) => {
      const v = parseList($<HTMLInputElement>(id).value, name);
      return typeof v === "string" ? v : v.length > 1 ? `${name}: give one number` : v[0];
    };
    const ks = parseList($<HTMLInputElement>("#sk").value, "draft lengths");
    const f = { ks, max_new: one("#sn", "tokens per prompt"), limit: one("#slimit", "prompts"), reps: one("#sr", "repetitions"),
      trials: $<HTMLInputElement>("#strials").value.trim() === "0" ? 0 : one("#strials", "sampling runs") };
    const bad = Object.values(f).find((v) => typeof v === "string");
    if (bad) return bad as string;
    const drafters: DrafterKind[] = [];
    if ($<HTMLInputElement>("#dm").checked) drafters.push("draft-model");
    if ($<HTMLInputElement>("#ng").checked) drafters.push("ngram");
    return { ...f, ks: (ks as number[]).length ? (ks as number[]) : undefined, drafters } as {
      ks?: number[]; max_new?: number; limit?: number; reps?: number; trials?: number; drafters: DrafterKind[] };
  };

  const run = async (kind: "spec_gate" | "spec_bench") => {
    $("#serr").textContent = "";
    const f = fields();
    if (typeof f === "string") { $("#serr").textContent = f; return; }
    const models = { target: $<HTMLSelectElement>("#starget").value, draft: $<HTMLSelectElement>("#sdraft").value };
    gateBtn.disabled = benchBtn.disabled = true; cancel.disabled = false; running = kind;
    const onProgress = (p: SpecProgress) => { label.textContent = progressText(p); };
    try {
      if (kind === "spec_gate") {
        const out = await jobs.once(kind, () => api.specGate({ ...models, options: { ks: f.ks, drafters: f.drafters, max_new: f.max_new,
          limit: f.limit, sampling_trials: f.trials } }, onProgress));
        if (out) {
          $("#verdict").innerHTML = verdictHtml(out);
          $("#gate-rows tbody").innerHTML = out.greedy.map(gateRowHtml).join("");
          $("#sampling").innerHTML = out.sampling.map(samplingHtml).join("");
          label.textContent = "done";
        }
      } else {
        const out = await jobs.once(kind, () => api.specBench({ ...models, options: { ks: f.ks, drafters: f.drafters, max_new: f.max_new,
          reps: f.reps } }, onProgress));
        if (out) {
          $("#sreport").textContent = out.report_md;
          $("#verdict").innerHTML = `bench ${out.run_id === null ? "not stored" : `stored as run ${out.run_id}`}${out.results_dir ? ` · results in <code>${esc(out.results_dir)}</code>` : ""}`;
          label.textContent = "done";
        }
      }
    } catch (e) {
      $("#serr").textContent = errText(e);
      label.textContent = "";
    } finally {
      gateBtn.disabled = benchBtn.disabled = false; cancel.disabled = true; running = null;
    }
  };
  gateBtn.addEventListener("click", () => run("spec_gate"));
  benchBtn.addEventListener("click", () => run("spec_bench"));
}
