import "./style.css";
import { api, errText } from "./ipc";
import { esc } from "./format";
import { machinePage } from "./pages/machine";
import { benchPage } from "./pages/bench";
import { rooflinePage } from "./pages/roofline";
import { frontierPage } from "./pages/frontier";
import { chatPage } from "./pages/chat";
import { speculativePage } from "./pages/speculative";
import { servePage } from "./pages/serve";
import { historyPage } from "./pages/history";

export type Page = (root: HTMLElement) => Promise<void> | void;
const pages: Record<string, Page> = {
  machine: machinePage, benchmarks: benchPage, roofline: rooflinePage,
  frontier: frontierPage, speculative: speculativePage, serve: servePage, chat: chatPage, history: historyPage,
};
// Pages that hold live work keep their DOM when you navigate away and back.
const kept = new Map<string, HTMLElement>();
const KEEP = new Set(["benchmarks", "speculative", "serve", "chat"]);

async function show() {
  const name = location.hash.replace("#", "") || "machine";
  const page = pages[name] ?? machinePage;
  const main = document.getElementById("page")!;
  document.querySelectorAll("#nav a").forEach((a) => a.classList.toggle("active", (a as HTMLElement).dataset.page === name));
  for (const el of Array.from(main.children)) (el as HTMLElement).hidden = true;
  if (KEEP.has(name) && kept.has(name)) {
    kept.get(name)!.hidden = false;
    return;
  }
  for (const el of Array.from(main.children)) if (!KEEP.has((el as HTMLElement).dataset.page ?? "")) el.remove();
  const root = document.createElement("section");
  root.dataset.page = name;
  root.id = `page-${name}`;
  main.appendChild(root);
  if (KEEP.has(name)) kept.set(name, root);
  try {
    await page(root);
  } catch (e) {
    root.innerHTML = `<p class="error">${esc(errText(e))}</p>`;
  }
}

async function status() {
  const el = document.getElementById("status")!;
  try {
    const s = await api.live();
    el.innerHTML = [s.bandwidth, s.thermal, s.power, s.memory].map((l) => `<div>${esc(l)}</div>`).join("");
  } catch (e) {
    el.textContent = errText(e);
  }
}

window.addEventListener("hashchange", show);
api.onStoreChanged(() => {
  status();
  const name = location.hash.replace("#", "") || "machine";
  if (!KEEP.has(name)) show();
}).catch(() => {});
show();
status();
setInterval(status, 5000);
