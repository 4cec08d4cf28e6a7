import { describe, expect, it } from "vitest";
import { applyUrl, coalesce, emptyChat, send, urlRateUnit, urlStop } from "./chat";
import type { ChatState } from "./chat";
import type { UrlChatStats } from "./types";

const stats = (over: Partial<UrlChatStats>): UrlChatStats => ({
  model: "m", server_model: null, n_chunks: 1, completion_tokens: null, prompt_tokens: null, token_source: "chunks",
  ttft_ms: 50, last_chunk_ms: 50, e2el_ms: null, decode_tps: null, finish_reason: null, cancelled: false, timings: null, ...over,
});

describe("chat pointed at a URL", () => {
  it("appends streamed chunks to the assistant message and keeps core's figures", () => {
    let s = send(emptyChat(), "hi") as ChatState;
    s = applyUrl(s, { event: "started", url: "http://x", model: "m" });
    s = applyUrl(s, { event: "token", text: "Bon", stats: stats({ n_chunks: 1 }) });
    s = applyUrl(s, { event: "token", text: "jour", stats: stats({ n_chunks: 2, last_chunk_ms: 70, decode_tps: 50 }) });
    expect(s.messages[1]).toEqual({ role: "assistant", content: "Bonjour" });
    expect(s.urlStats?.decode_tps).toBe(50);
    expect(s.streaming).toBe(true);
    const fin = stats({ n_chunks: 2, completion_tokens: 2, token_source: "usage", finish_reason: "length", decode_tps: 50, e2el_ms: 80 });
    s = applyUrl(s, { event: "done", stats: fin });
    expect(s.streaming).toBe(false);
    expect(s.stop).toBe("max_tokens");
    expect(s.urlStats).toEqual(fin);
  });
  it("names the rate's unit by where the count came from", () => {
    expect(urlRateUnit(stats({}))).toBe("chunks/s, measured at the client");
    expect(urlRateUnit(stats({ token_source: "usage" }))).toBe("tok/s, measured at the client");
    expect(urlRateUnit(null)).toBe("chunks/s, measured at the client");
  });
  it("maps the end of a URL turn to the local stop reasons", () => {
    expect(urlStop(stats({ cancelled: true, finish_reason: "length" }))).toBe("cancelled");
    expect(urlStop(stats({ finish_reason: "length" }))).toBe("max_tokens");
    expect(urlStop(stats({ finish_reason: "stop" }))).toBe("end_of_generation");
  });
});

describe("coalesce", () => {
  it("paints the first request at once, then at most once per window, and now() drops a pending one", () => {
    let t = 0;
    const timers: { at: number; f: () => void }[] = [];
    const clock = { now: () => t, later: (f: () => void, ms: number) => timers.push({ at: t + ms, f }) };
    const advance = (to: number) => {
      t = to;
      for (const x of timers.splice(0).sort((a, b) => a.at - b.at)) if (x.at <= to) x.f(); else timers.push(x);
    };
    let paints = 0;
    const c = coalesce(() => paints++, 100, clock);
    c.soon();
    expect(paints).toBe(1);            // the first token shows at once
    for (let i = 1; i <= 50; i++) { advance(i); c.soon(); }
    expect(paints).toBe(1);            // 50 tokens inside the window: no paint yet
    advance(100);
    expect(paints).toBe(2);            // one paint for all of them, at the window's end
    advance(150); c.soon();
    c.now();
    expect(paints).toBe(3);            // the end of the turn paints at once
    advance(400);
    expect(paints).toBe(3);            // and the pending paint was dropped
  });
});
