// A minimal W3C WebDriver client (fetch + JSON): enough to drive the app through
// tauri-driver without extra npm packages.
export class WebDriver {
  constructor(base) { this.base = base; this.sid = null; }
  async cmd(method, path, body) {
    const url = this.sid && !path.startsWith("/session/") && path !== "/session" ? `${this.base}/session/${this.sid}${path}` : `${this.base}${path}`;
    const r = await fetch(url, { method, headers: { "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
    const j = await r.json();
    if (!r.ok || (j.value && j.value.error)) throw new Error(`${method} ${path}: ${JSON.stringify(j.value ?? j).slice(0, 400)}`);
    return j.value;
  }
  async start(caps) {
    const v = await this.cmd("POST", "/session", { capabilities: { alwaysMatch: caps } });
    this.sid = v.sessionId;
    return v;
  }
  quit() { return this.sid ? this.cmd("DELETE", `/session/${this.sid}`) : undefined; }
  exec(script, args = []) { return this.cmd("POST", "/execute/sync", { script, args }); }
  execAsync(script, args = []) { return this.cmd("POST", "/execute/async", { script, args }); }
  async find(css) { const v = await this.cmd("POST", "/element", { using: "css selector", value: css }); return Object.values(v)[0]; }
  click(el) { return this.cmd("POST", `/element/${el}/click`, {}); }
  text(el) { return this.cmd("GET", `/element/${el}/text`); }
  async screenshot() { return Buffer.from(await this.cmd("GET", "/screenshot"), "base64"); }
  /** Polls `script` (returning a truthy value when done) every 250 ms. */
  async waitFor(what, script, timeoutMs = 30000, args = []) {
    const t0 = Date.now();
    let last;
    while (Date.now() - t0 < timeoutMs) {
      try { last = await this.exec(script, args); if (last) return last; } catch (e) { last = String(e); }
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
  }
}

/** Width and height from a PNG's IHDR, or throws when it is not a PNG. */
export function pngSize(buf) {
  const sig = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  if (buf.length < 24 || !buf.subarray(0, 8).equals(sig) || buf.toString("ascii", 12, 16) !== "IHDR") throw new Error("not a PNG");
  return [buf.readUInt32BE(16), buf.readUInt32BE(20)];
}
