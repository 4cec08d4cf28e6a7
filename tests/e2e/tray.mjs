// Reads and clicks the tray menu over D-Bus (libayatana-appindicator exports it as
// com.canonical.dbusmenu on the session bus).
import { execFileSync } from "node:child_process";

const busctl = (...a) => execFileSync("busctl", ["--user", ...a], { encoding: "utf8" });

/** Finds the app's StatusNotifierItem bus name and its menu object path. */
export function findMenu(pid) {
  const names = JSON.parse(busctl("list", "--json=short"));
  for (const n of names) {
    if (n.pid !== pid || !n.name) continue;
    let tree;
    try { tree = busctl("tree", n.name, "--list"); } catch { continue; }
    const path = tree.split("\n").map((s) => s.trim()).find((p) => /\/Menu$/.test(p) && p.includes("NotificationItem"));
    if (path) return { name: n.name, path };
  }
  return null;
}

/** The menu's items: [{ id, label }]. */
export function layout(menu) {
  const out = JSON.parse(busctl("--json=short", "call", menu.name, menu.path, "com.canonical.dbusmenu", "GetLayout", "iias", "--", "0", "-1", "1", "label"));
  // (u (ia{sv}av)): revision, (id, props, children)
  const root = out.data[1];
  const items = [];
  const walk = (node) => {
    const [id, props, children] = node;
    if (props.label) items.push({ id, label: props.label.data });
    for (const c of children) walk(c.data);
  };
  walk(root);
  return items;
}

export function click(menu, id) {
  busctl("call", menu.name, menu.path, "com.canonical.dbusmenu", "Event", "isvu", "--", String(id), "clicked", "s", "", "0");
}
