import { describe, expect, it } from "vitest";
import { bytes, esc, meanStd, num, parseList, pct } from "./format";
import { apply, emptyChat, request, send } from "./chat";
import { Jobs, togglePick } from "./jobs";
import { decades, logMap } from "./plot";

describe("format", () => {
  it("prints a dash for anything unmeasured", () => {
    expect(num(null)).toBe("—");
    expect(num(NaN)).toBe("—");
    expect(num(undefined)).toBe("—");
    expect(num(12.345, 2)).toBe("12.35");
    expect(meanStd(61.23, 0.46)).toBe("61.2 ± 0.5");
    expect(meanStd(null, 1)).toBe("—");
    expect(pct(0.734)).toBe("73%");
    expect(pct(null)).toBe("—");
  });
  it("names both byte bases like core does", () => {
    // core's test: 2^30 bytes prints "1.07 GB (1.00 GiB)"
    expect(bytes(2 ** 30)).toBe("1.07 GB (1.00 GiB)");
    expect(bytes(5_000_000)).toBe("5.0 MB (4.8 MiB)");
  });
  it("parses lists and names the bad item", () => {
    expect(parseList("512, 1024", "prompt")).toEqual([512, 1024]);
    expect(parseList("", "prompt")).toEqual([]);
    expect(parseList("", "threads", false)).toBe("threads: give at least one value");
    expect(parseList("12,abc", "gen")).toBe('gen: "abc" is not a whole number');
    expect(parseList("0", "threads")).toBe("threads: values must be positive");
    expect(parseList("0,512", "depths")).toEqual([0, 512]);
  });
  it("escapes html", () => {
    expect(esc(`<b a="1">&'`)).toBe("&lt;b a=&quot;1&quot;&gt;&amp;&#39;");
  });
});

describe("chat state", () => {
  const stats = { prompt_tokens: 9, n_gen: 1, ttft_ms: 50, prefill_tps: 180, decode_tps: null, ceiling_tps: 300, pct_of_ceiling: null, warnings: [] };
  it("streams tokens into the assistant message and records why it stopped", () => {
    let s = send(emptyChat(), "hi");
    if (typeof s === "string") throw new Error(s);
    expect(request(s)).toEqual([{ role: "user", content: "hi" }]);
    s = apply(s, { event: "token", text: "Hel", stats });
    s = apply(s, { event: "token", text: "lo", stats: { ...stats, n_gen: 2, decode_tps: 120, pct_of_ceiling: 40 } });
    expect(s.messages[1].content).toBe("Hello");
    expect(s.stats?.decode_tps).toBe(120);
    expect(s.streaming).toBe(true);
    s = apply(s, { event: "done", reason: "cancelled", stats });
    expect(s.streaming).toBe(false);
    expect(s.stop).toBe("cancelled");
  });
  it("refuses a second send while streaming", () => {
    const s = send(emptyChat(), "a");
    if (typeof s === "string") throw new Error(s);
    expect(send(s, "b")).toBe("a reply is still streaming: stop it first");
    expect(send(emptyChat(), "  ")).toBe("type a message");
  });
});

describe("jobs", () => {
  it("never starts the same job twice at once", async () => {
    const j = new Jobs();
    let release!: () => void;
    const first = j.once("bench", () => new Promise<number>((r) => (release = () => r(1))));
    expect(j.isRunning("bench")).toBe(true);
    expect(await j.once("bench", async () => 2)).toBeUndefined();
    release();
    expect(await first).toBe(1);
    expect(await j.once("bench", async () => 3)).toBe(3);
  });
  it("compares the two most recent picks", () => {
    expect(togglePick([], 3)).toEqual([3]);
    expect(togglePick([3, 5], 7)).toEqual([5, 7]);
    expect(togglePick([3, 5], 3)).toEqual([5]);
  });
});

describe("plot", () => {
  it("maps decades evenly on a log axis", () => {
    const s = { d0: 1, d1: 1000, r0: 0, r1: 300 };
    expect(logMap(s, 1)).toBe(0);
    expect(logMap(s, 10)).toBeCloseTo(100);
    expect(logMap(s, 1000)).toBeCloseTo(300);
    expect(decades(0.05, 2000)).toEqual([0.1, 1, 10, 100, 1000]);
  });
});
