// The Chat page's state machine: applies core's ChatEvents to the transcript.
import type { ChatEvent, ChatMessage, ChatStats, StopReason, UrlChatEvent, UrlChatStats } from "./types";

export interface ChatState {
  messages: ChatMessage[];
  streaming: boolean;
  /** Figures of a turn on the local engine. */
  stats: ChatStats | null;
  /** Figures of a turn sent to a URL (measured at the client, plus the server's timings). */
  urlStats: UrlChatStats | null;
  stop: StopReason | null;
  error: string | null;
}

export const emptyChat = (): ChatState => ({ messages: [], streaming: false, stats: null, urlStats: null, stop: null, error: null });

/** Adds the user's message and an empty assistant message; refuses while streaming. */
export function send(s: ChatState, text: string): ChatState | string {
  if (s.streaming) return "a reply is still streaming: stop it first";
  if (text.trim().length === 0) return "type a message";
  return {
    messages: [...s.messages, { role: "user", content: text }, { role: "assistant", content: "" }],
    streaming: true, stats: null, urlStats: null, stop: null, error: null,
  };
}

/** The messages to send to core: everything but the empty assistant placeholder. */
export function request(s: ChatState): ChatMessage[] {
  const m = s.messages;
  return m.length > 0 && m[m.length - 1].role === "assistant" && m[m.length - 1].content === "" ? m.slice(0, -1) : m;
}

export function apply(s: ChatState, e: ChatEvent): ChatState {
  switch (e.event) {
    case "started":
      return s;
    case "token": {
      const m = s.messages.slice();
      const last = m[m.length - 1];
      m[m.length - 1] = { ...last, content: last.content + e.text };
      return { ...s, messages: m, stats: e.stats };
    }
    case "done":
      return { ...s, streaming: false, stats: e.stats, stop: e.reason };
  }
}

function appendText(s: ChatState, text: string): ChatMessage[] {
  const m = s.messages.slice();
  const last = m[m.length - 1];
  m[m.length - 1] = { ...last, content: last.content + text };
  return m;
}

/** Applies an event of a turn sent to a URL. */
export function applyUrl(s: ChatState, e: UrlChatEvent): ChatState {
  switch (e.event) {
    case "started":
      return s;
    case "token":
      return { ...s, messages: appendText(s, e.text), urlStats: e.stats };
    case "done":
      return { ...s, streaming: false, urlStats: e.stats, stop: urlStop(e.stats) };
  }
}

/** Why a URL turn ended, in the local engine's terms. */
export function urlStop(st: UrlChatStats): StopReason {
  if (st.cancelled) return "cancelled";
  return st.finish_reason === "length" ? "max_tokens" : "end_of_generation";
}

/** The decode readout's unit: tok/s once the server's usage gave the count, else chunks/s. */
export function urlRateUnit(st: UrlChatStats | null): string {
  return st?.token_source === "usage" ? "tok/s, measured at the client" : "chunks/s, measured at the client";
}

export function failed(s: ChatState, err: string): ChatState {
  return { ...s, streaming: false, error: err };
}

export const stopText: Record<StopReason, string> = {
  end_of_generation: "finished",
  max_tokens: "stopped at the token limit",
  cancelled: "stopped by you",
  context_full: "stopped: the context is full",
};

/**
 * Coalesces repaints while a reply streams: `soon()` asks for a repaint and at most
 * one runs per `everyMs` (the first at once); `now()` repaints at once and drops a
 * pending one. A window that repaints for every token takes the CPU from the decode
 * it shows (measured: half the bench's decode rate on 2 cores).
 */
export function coalesce(paint: () => void, everyMs: number, clock: { now(): number; later(f: () => void, ms: number): unknown } =
  { now: () => Date.now(), later: (f, ms) => setTimeout(f, ms) }) {
  let last = -Infinity;
  let pending = false;
  const run = () => { pending = false; last = clock.now(); paint(); };
  return {
    soon() {
      if (pending) return;
      const wait = last + everyMs - clock.now();
      if (wait <= 0) { run(); return; }
      pending = true;
      clock.later(() => { if (pending) run(); }, wait);
    },
    now() { run(); },
  };
}
