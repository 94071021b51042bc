/* The landing page: a link to each table's dealer station and to the floor, from /site.json. */
"use strict";
fetch("/site.json", { cache: "no-store" }).then((r) => r.json()).then((site) => {
  const list = document.getElementById("stations");
  for (const t of site.tables || []) {
    const a = document.createElement("a");
    a.href = `/station?table=${encodeURIComponent(t.id)}`;
    a.textContent = `${t.id} (${t.game})`;
    const li = document.createElement("li");
    li.append(a);
    list.append(li);
  }
}).catch((e) => { document.getElementById("stations").textContent = `cannot read /site.json: ${e}`; });
