// report.html in Debian's chromium (through playwright-core): every chart image
// decodes and has a size, the page is self-contained (no request leaves the file),
// no cell prints NaN, inf or undefined, and a full-page screenshot is saved.
// The check first proves it can fail: a copy of the page with one chart's data broken
// must be caught.
//   node tests/e2e/report-html.mjs REPORT_DIR [SCREENSHOT.png]
// Skips loudly (exit 0) when chromium or playwright-core is absent; MEMWALL_REQUIRE_E2E=1
// turns a skip into a failure.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
const dir = path.resolve(process.argv[2] ?? path.join(root, "results/report"));
const shot = process.argv[3] ?? path.join(dir, "report-screenshot.png");
const skip = (why) => {
  console.error(`!!!!!!!! SKIPPED report.html chromium test: ${why} !!!!!!!!`);
  process.exit(process.env.MEMWALL_REQUIRE_E2E === "1" ? 1 : 0);
};
let chromium;
try { ({ chromium } = createRequire(path.join(root, "ui/package.json"))("playwright-core")); } catch { skip("playwright-core not installed (npm --prefix ui ci)"); }
const exe = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].find((p) => fs.existsSync(p));
if (!exe) skip("no chromium");
const html = path.join(dir, "report.html");
if (!fs.existsSync(html)) { console.error(`FAIL: ${html} does not exist (run memwall report)`); process.exit(1); }
const charts = fs.readdirSync(path.join(dir, "charts")).filter((f) => f.endsWith(".svg")).map((f) => f.slice(0, -4)).sort();

const browser = await chromium.launch({ executablePath: exe, args: ["--no-sandbox"] });
async function inspect(file) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const outside = [];
  page.on("request", (r) => { if (!r.url().startsWith("file:") && !r.url().startsWith("data:")) outside.push(r.url()); });
  await page.goto("file://" + file, { waitUntil: "load" });
  const imgs = await page.$$eval("img", (els) => els.map((e) => ({
    chart: e.dataset.chart, ok: e.complete && e.naturalWidth > 0 && e.naturalHeight > 0, w: e.naturalWidth })));
  const cells = await page.$$eval("td", (els) => els.map((e) => e.textContent.trim()));
  return { page, imgs, outside, cells };
}
const problems = (r) => {
  const p = [];
  const shown = r.imgs.map((i) => i.chart).sort();
  if (JSON.stringify(shown) !== JSON.stringify(charts)) p.push(`charts shown ${JSON.stringify(shown)} != charts written ${JSON.stringify(charts)}`);
  for (const i of r.imgs) if (!i.ok) p.push(`chart ${i.chart} is a broken image`);
  if (r.outside.length) p.push(`requests outside the file: ${r.outside.join(", ")}`);
  for (const c of r.cells) if (["", "NaN", "inf", "-inf", "undefined", "null"].includes(c)) p.push(`a cell prints ${JSON.stringify(c)}`);
  return p;
};

let failed = false;
if (charts.length > 0) {
  // The check can fail: break the first chart's data and expect it to be caught.
  const text = fs.readFileSync(html, "utf8");
  const broken = text.replace(/src="data:image\/svg\+xml;base64,[A-Za-z0-9+/=]{8}/, 'src="data:image/svg+xml;base64,!!!!!!!!');
  const tmp = path.join(dir, ".broken-report.html");
  fs.writeFileSync(tmp, broken);
  const r = await inspect(tmp);
  fs.unlinkSync(tmp);
  await r.page.close();
  if (!problems(r).some((p) => p.includes("broken image"))) { console.error("FAIL: a broken chart was not detected"); failed = true; }
} else {
  console.error("FAIL: the report has no chart to check");
  failed = true;
}
const r = await inspect(html);
await r.page.screenshot({ path: shot, fullPage: true });
for (const p of problems(r)) { console.error(`FAIL: ${p}`); failed = true; }
await browser.close();
if (failed) process.exit(1);
console.log(`report.html: ${r.imgs.length} charts decoded, ${r.cells.length} cells, no outside request; screenshot ${shot}`);
