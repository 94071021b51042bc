/* The landing page: a link to each table's dealer station and to the floor, from /site.json. */
"use strict";
fetch("/site.json", { cache: "no-store" }).then((r) => r.json()).then((site) => {
  const list = document.getElementById("stations");
  for (const t of site.tables || []) {
    const a = document.createElement("a");
    a.className = "link-tile";
    a.href = `/station?table=${encodeURIComponent(t.id)}`;
    const id = document.createElement("strong");
    id.textContent = t.id;
    a.append(id, ` ${t.game}`);
    list.append(a);
  }
}).catch((e) => {
  const list = document.getElementById("stations");
  list.className = "error-item";
  list.textContent = `⚠ ERROR cannot read /site.json: ${e}`;
});
