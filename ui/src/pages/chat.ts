import { api, errText } from "../ipc";
import { esc, num } from "../format";
import { apply, applyUrl, coalesce, emptyChat, failed, request, send, stopText, urlRateUnit, type ChatState } from "../chat";

const INTRO_LOCAL = "The chat template comes from the model's GGUF; decoding is greedy.";
const INTRO_URL = "Streams /v1/chat/completions from the server (temperature 0). TTFT and the decode rate are measured at the client, from the chunks' arrival; the server's own timings are shown when its final chunk carries them (memwall serve and llama-server send them).";

export async function chatPage(root: HTMLElement) {
  const models = (await api.models()).filter((m) => m.present);
  root.innerHTML = `
    <h1>Chat</h1>
    <div class="row"><label>Talk to <select id="cmode"><option value="local">memwall's engine (local)</option><option value="url">an OpenAI-compatible URL</option></select></label></div>
    <div class="row" id="local-row"><label>Model <select id="cmodel">${models.map((m) => `<option value="${esc(m.name)}">${esc(m.name)} — ${esc(m.title)}</option>`).join("")}</select></label>
      <label>max tokens <input id="maxt" value="128" size="5"></label><button id="clear">New chat</button></div>
    <div class="row" id="url-row" hidden><label>URL <input id="curl" size="28" placeholder="http://127.0.0.1:8080"></label>
      <label>model <input id="curlmodel" size="18" placeholder="first /v1/models id"></label>
      <label>API key <input id="ckey" type="password" size="12" placeholder="optional"></label></div>
    <div class="cards" id="readouts">
      <div class="card"><div class="k">TTFT</div><div class="v" id="ttft">—</div><div class="muted" id="ttft-u">ms</div></div>
      <div class="card" id="pre-card"><div class="k">Prefill</div><div class="v" id="pre">—</div><div class="muted" id="pre-u">tok/s</div></div>
      <div class="card"><div class="k">Decode</div><div class="v" id="dec">—</div><div class="muted" id="dec-u">tok/s</div></div>
      <div class="card" id="pct-card"><div class="k">% of ceiling</div><div class="v" id="pct">—</div><div class="muted" id="ceil">ceiling —</div></div>
      <div class="card" id="srv-card" hidden><div class="k">Server's timings</div><div class="v" id="srv-dec">—</div><div class="muted" id="srv">not sent</div></div>
      <div class="card"><div class="k">Tokens</div><div class="v" id="ntok">—</div><div class="muted" id="why"></div></div>
    </div>
    <div class="transcript" id="transcript"><p class="muted">${INTRO_LOCAL}</p></div>
    <div class="row"><textarea id="msg" rows="2" cols="80" placeholder="Ask something…"></textarea>
      <button id="send" class="primary">Send</button><button id="stop" disabled>Stop</button></div>
    <p id="cerr" class="error"></p>`;
  const $ = <T extends HTMLElement>(s: string) => root.querySelector(s) as T;
  const noModel = "No model is fetched: run `memwall models fetch`.";
  let s: ChatState = emptyChat();
  const isUrl = () => $<HTMLSelectElement>("#cmode").value === "url";
  const render = () => {
    const url = isUrl();
    $("#local-row").querySelectorAll("label:first-child").forEach((l) => ((l as HTMLElement).hidden = url));
    $("#url-row").hidden = !url;
    $("#pre-card").hidden = url;
    $("#pct-card").hidden = url;
    $("#srv-card").hidden = !url;
    $("#transcript").innerHTML = s.messages.map((m) => `<div class="msg ${m.role}"><b>${m.role}:</b> ${esc(m.content)}</div>`).join("") ||
      `<p class="muted">${url ? INTRO_URL : INTRO_LOCAL}</p>`;
    $("#transcript").scrollTop = 1e9;
    if (url) {
      const u = s.urlStats;
      $("#ttft").textContent = num(u?.ttft_ms, 0);
      $("#ttft-u").textContent = "ms, measured at the client";
      $("#dec").textContent = num(u?.decode_tps);
      $("#dec-u").textContent = urlRateUnit(u);
      const t = u?.timings ?? null;
      $("#srv-dec").textContent = t ? num(t.predicted_per_second) : "—";
      $("#srv").textContent = t
        ? `decode tok/s · prefill ${num(t.prompt_per_second)} tok/s · ${t.prompt_n ?? "—"} prompt + ${t.cache_n ?? "—"} cached tokens`
        : u && !s.streaming ? "the server sent no timings" : "on the final chunk";
      $("#ntok").textContent = u ? `${u.completion_tokens ?? u.n_chunks}` : "—";
    } else {
      const st = s.stats;
      $("#ttft").textContent = num(st?.ttft_ms, 0);
      $("#ttft-u").textContent = "ms";
      $("#pre").textContent = num(st?.prefill_tps);
      $("#pre-u").textContent = st ? `tok/s over ${st.prompt_tokens} prompt tokens` : "tok/s";
      $("#dec").textContent = num(st?.decode_tps);
      $("#dec-u").textContent = "tok/s";
      $("#pct").textContent = st?.pct_of_ceiling == null ? "—" : `${num(st.pct_of_ceiling, 0)}%`;
      $("#ceil").textContent = st?.ceiling_tps == null ? "ceiling — (no STREAM stored)" : `ceiling ${num(st.ceiling_tps)} tok/s`;
      $("#ntok").textContent = st ? `${st.n_gen}` : "—";
    }
    $("#why").textContent = s.stop ? stopText[s.stop] : s.streaming ? "streaming…" : "";
    $("#cerr").textContent = s.error ?? (!url && models.length === 0 ? noModel : "");
    $<HTMLButtonElement>("#send").disabled = s.streaming;
    $<HTMLButtonElement>("#stop").disabled = !s.streaming;
    $<HTMLSelectElement>("#cmode").disabled = s.streaming;
  };
  // Streamed events repaint at most 10 times a second (core also sends the local
  // engine's tokens at most every 50 ms); the end of a turn repaints at once.
  const paint = coalesce(render, 100);
  $("#cmode").addEventListener("change", () => { if (!s.streaming) { s = emptyChat(); render(); } });
  $("#clear").addEventListener("click", () => { if (!s.streaming) { s = emptyChat(); render(); } });
  $("#stop").addEventListener("click", () => api.chatStop());
  const go = async () => {
    const next = send(s, $<HTMLTextAreaElement>("#msg").value);
    if (typeof next === "string") { $("#cerr").textContent = next; return; }
    s = next;
    $<HTMLTextAreaElement>("#msg").value = "";
    render();
    const maxTokens = Number($<HTMLInputElement>("#maxt").value) || 128;
    try {
      if (isUrl()) {
        const model = $<HTMLInputElement>("#curlmodel").value.trim();
        const key = $<HTMLInputElement>("#ckey").value;
        await api.chatUrl({ url: $<HTMLInputElement>("#curl").value.trim(), model: model || null, api_key: key || null,
          messages: request(s), max_tokens: maxTokens }, (e) => { s = applyUrl(s, e); paint.soon(); });
      } else {
        const last = await api.chat({ model: $<HTMLSelectElement>("#cmodel").value, messages: request(s), max_tokens: maxTokens },
          (e) => { s = apply(s, e); paint.soon(); });
        if (last.warnings?.length) s = { ...s, error: `warning: ${last.warnings.join("; ")}` };
      }
    } catch (e) {
      s = failed(s, errText(e));
    }
    if (s.streaming) s = { ...s, streaming: false };
    paint.now();
  };
  $("#send").addEventListener("click", go);
  $("#msg").addEventListener("keydown", (e) => { if ((e as KeyboardEvent).key === "Enter" && !(e as KeyboardEvent).shiftKey) { e.preventDefault(); go(); } });
  render();
}
