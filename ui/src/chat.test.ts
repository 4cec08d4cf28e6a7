import { describe, expect, it } from "vitest";
import { applyUrl, emptyChat, send, urlRateUnit, urlStop } from "./chat";
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
