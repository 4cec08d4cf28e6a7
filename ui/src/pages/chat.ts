import { api, errText } from "../ipc";
import { esc, num } from "../format";
import { apply, emptyChat, failed, request, send, stopText, type ChatState } from "../chat";

export async function chatPage(root: HTMLElement) {
  const models = (await api.models()).filter((m) => m.present);
  root.innerHTML = `
    <h1>Chat</h1>
    <div class="row"><label>Model <select id="cmodel">${models.map((m) => `<option value="${esc(m.name)}">${esc(m.name)} — ${esc(m.title)}</option>`).join("")}</select></label>
      <label>max tokens <input id="maxt" value="128" size="5"></label><button id="clear">New chat</button></div>
    <div class="cards" id="readouts">
      <div class="card"><div class="k">TTFT</div><div class="v" id="ttft">—</div><div class="muted">ms</div></div>
      <div class="card"><div class="k">Prefill</div><div class="v" id="pre">—</div><div class="muted">tok/s</div></div>
      <div class="card"><div class="k">Decode</div><div class="v" id="dec">—</div><div class="muted">tok/s</div></div>
      <div class="card"><div class="k">% of ceiling</div><div class="v" id="pct">—</div><div class="muted" id="ceil">ceiling —</div></div>
      <div class="card"><div class="k">Tokens</div><div class="v" id="ntok">—</div><div class="muted" id="why"></div></div>
    </div>
    <div class="transcript" id="transcript"><p class="muted">The chat template comes from the model's GGUF; decoding is greedy.</p></div>
    <div class="row"><textarea id="msg" rows="2" cols="80" placeholder="Ask something…"></textarea>
      <button id="send" class="primary">Send</button><button id="stop" disabled>Stop</button></div>
    <p id="cerr" class="error"></p>`;
  const $ = <T extends HTMLElement>(s: string) => root.querySelector(s) as T;
  if (models.length === 0) $("#cerr").textContent = "No model is fetched: run `memwall models fetch`.";
  let s: ChatState = emptyChat();
  const render = () => {
    $("#transcript").innerHTML = s.messages.map((m) => `<div class="msg ${m.role}"><b>${m.role}:</b> ${esc(m.content)}</div>`).join("") ||
      `<p class="muted">The chat template comes from the model's GGUF; decoding is greedy.</p>`;
    $("#transcript").scrollTop = 1e9;
    const st = s.stats;
    $("#ttft").textContent = num(st?.ttft_ms, 0);
    $("#pre").textContent = num(st?.prefill_tps);
    $("#dec").textContent = num(st?.decode_tps);
    $("#pct").textContent = st?.pct_of_ceiling == null ? "—" : `${num(st.pct_of_ceiling, 0)}%`;
    $("#ceil").textContent = st?.ceiling_tps == null ? "ceiling — (no STREAM stored)" : `ceiling ${num(st.ceiling_tps)} tok/s`;
    $("#ntok").textContent = st ? `${st.n_gen}` : "—";
    $("#why").textContent = s.stop ? stopText[s.stop] : s.streaming ? "streaming…" : "";
    $("#cerr").textContent = s.error ?? "";
    $<HTMLButtonElement>("#send").disabled = s.streaming;
    $<HTMLButtonElement>("#stop").disabled = !s.streaming;
  };
  $("#clear").addEventListener("click", () => { if (!s.streaming) { s = emptyChat(); render(); } });
  $("#stop").addEventListener("click", () => api.chatStop());
  const go = async () => {
    const next = send(s, $<HTMLTextAreaElement>("#msg").value);
    if (typeof next === "string") { $("#cerr").textContent = next; return; }
    s = next;
    $<HTMLTextAreaElement>("#msg").value = "";
    render();
    try {
      const last = await api.chat({ model: $<HTMLSelectElement>("#cmodel").value, messages: request(s), max_tokens: Number($<HTMLInputElement>("#maxt").value) || 128 },
        (e) => { s = apply(s, e); render(); });
      if (last.warnings?.length) s = { ...s, error: `warning: ${last.warnings.join("; ")}` };
    } catch (e) {
      s = failed(s, errText(e));
    }
    if (s.streaming) s = { ...s, streaming: false };
    render();
  };
  $("#send").addEventListener("click", go);
  $("#msg").addEventListener("keydown", (e) => { if ((e as KeyboardEvent).key === "Enter" && !(e as KeyboardEvent).shiftKey) { e.preventDefault(); go(); } });
}
