/* The pit-boss floor: every table at a glance (the ones needing a person first), one table in
 * detail with its timeline, last rounds and per-dealer figures, and the supervisor's signed acts.
 * Logged in as `ops` it only reads; as `supervisor-<id>` it signs acts in the browser with the
 * supervisor's own key (WebCrypto, docs/mqtt-topics.md §10), which never leaves this page. */
"use strict";

const $ = (id) => document.getElementById(id);
const ui = { connected: false, banner: "DISCONNECTED", errors: [], user: null, supervisor: null, keyLoaded: false,
  tables: {}, statuses: {}, answers: [], selected: null };
window.screenState = ui;

const errors = new ErrorList($("errors"), ui);
let site = { tables: [], supervisors: [], node_ids: [] };
let signingKey = null; // a CryptoKey that can sign and can never be read back
const pending = new Map();

const ACTS = {
  void: { type: "supervisor_void", label: "VOID ROUND", round: true, reason: "required", cls: "danger" },
  pause: { type: "supervisor_pause", label: "PAUSE", cls: "warn" },
  resume: { type: "supervisor_resume", label: "RESUME", cls: "go" },
  close: { type: "supervisor_close", label: "CLOSE TABLE", cls: "danger" },
  reopen: { type: "supervisor_reopen", label: "REOPEN", cls: "go" },
  open_round: { type: "supervisor_open_round", label: "OPEN NEXT ROUND", cls: "" },
};

function table(id) {
  if (!ui.tables[id]) {
    const game = (site.tables.find((t) => t.id === id) || {}).game || "?";
    ui.tables[id] = { id, game, state: null, prompt: null, history: null, events: [], rescans: {}, security: 0, lastAlert: null };
  }
  return ui.tables[id];
}

const link = new Link({
  banner: $("banner"), state: ui, errors, role: "floor",
  subscriptions: () => {
    const kinds = ["state", "prompts/current", "events", "history"];
    if (ui.user === "ops") return [...kinds.map((k) => `${PREFIX}/tables/+/${k}`), topicOf.status("+")];
    const subs = [];
    for (const t of site.tables) subs.push(topicOf.state(t.id), topicOf.current(t.id), topicOf.events(t.id), topicOf.history(t.id));
    return [...subs, topicOf.status("+")];
  },
  onMessage,
  onChange: () => scheduleRender(),
});

function onMessage(topic, payload) {
  const where = splitTopic(topic);
  if (!where) return;
  let msg;
  try {
    msg = parsePayload(topic, payload);
    if (msg === null) return;
    checkMessage(where.kind, msg);
  } catch (e) {
    errors.add(`bad message on ${topic}: ${e.message}`);
    return;
  }
  if (where.kind === "status") {
    ui.statuses[where.node] = msg;
    scheduleRender();
    return;
  }
  if (!/^[A-Za-z0-9_]{1,32}$/.test(where.table)) return;
  clock.seen(msg.at);
  const t = table(where.table);
  if (where.kind === "state") {
    if (!t.state || t.state.session !== msg.session || (msg.version || 0) >= (t.state.version || 0)) t.state = msg;
  } else if (where.kind === "prompts/current") {
    if (!t.prompt || t.prompt.session !== msg.session || (msg.version || 0) >= (t.prompt.version || 0)) t.prompt = msg;
    if (msg.kind === "ALERT") t.lastAlert = msg;
  } else if (where.kind === "history") {
    t.history = msg;
  } else if (where.kind === "events") {
    takeEvent(t, msg);
  }
  scheduleRender();
}

function takeEvent(t, ev) {
  t.events.unshift(ev);
  if (t.events.length > 100) t.events.pop();
  const d = ev.data || {};
  if (ev.event === "scan_rejected" && ev.round_id) t.rescans[ev.round_id] = (t.rescans[ev.round_id] || 0) + 1;
  if (ev.event === "rejected" && /signature|supervisor|security/i.test(String(d.reason || ""))) t.security += 1;
  const mine = typeof d.command_id === "string" && pending.get(d.command_id);
  if (mine) {
    if (ev.event === "command_accepted" || ev.event === "command_repeated") Object.assign(mine, { status: "ACCEPTED", reason: null });
    else if (ev.event === "rejected") Object.assign(mine, { status: "REJECTED", reason: String(d.reason || "refused") });
  }
}

/* -- what needs a person ---------------------------------------------------------------------------- */

function online(t) {
  const m = t.state || t.prompt;
  return !!m && isCurrent(m, ui.statuses[m.node_id]);
}

function flags(t) {
  const out = [];
  const st = t.state || {};
  const isOn = online(t);
  if (!isOn) out.push(["OFFLINE", t.state ? `node ${t.state.node_id}` : "no data"]);
  if (t.prompt && t.prompt.kind === "ALERT" && isOn) out.push(["ALERT", t.prompt.reason || "alert"]);
  if (Object.keys(st.links_down || {}).length) out.push(["LINK", Object.keys(st.links_down).join(", ")]);
  if (st.mode && st.mode !== "open") out.push([st.mode.startsWith("closing") ? "CLOSING" : st.mode.toUpperCase(), st.paused_reason || ""]);
  else if (st.paused) out.push(["PAUSED", st.paused_reason || ""]);
  if (t.security) out.push(["SECURITY", `${t.security}`]);
  if (st.unsettled > 0) out.push(["UNSETTLED", `${st.unsettled}`]);
  const rescans = st.round_id ? t.rescans[st.round_id] || 0 : 0;
  if (rescans) out.push(["RESCANS", `${rescans}`]);
  return out;
}

function need(fl) {
  const names = fl.map((f) => f[0]);
  if (names.some((n) => ["OFFLINE", "ALERT", "LINK"].includes(n))) return "attention";
  if (names.some((n) => ["PAUSED", "CLOSED", "CLOSING", "CLOSING_PAUSED", "SECURITY", "UNSETTLED", "RESCANS"].includes(n))) return "watch";
  return "ok";
}

/* -- rendering ----------------------------------------------------------------------------------------- */

let renderQueued = false;
let pressing = false; // a finger or button held down: no redraw may take the target away
document.addEventListener("pointerdown", () => { pressing = true; }, true);
document.addEventListener("pointerup", () => { pressing = false; setTimeout(scheduleRender, 50); }, true);
document.addEventListener("pointercancel", () => { pressing = false; }, true);
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    if (pressing) {
      setTimeout(scheduleRender, 200);
      return;
    }
    render();
  });
}

function render() {
  const ids = site.tables.map((t) => t.id);
  for (const id of Object.keys(ui.tables)) if (!ids.includes(id)) ids.push(id);
  const rows = ids.map((id) => { const t = table(id); const fl = flags(t); return { t, fl, need: need(fl) }; });
  const rank = { attention: 0, watch: 1, ok: 2 };
  rows.sort((a, b) => rank[a.need] - rank[b.need] || a.t.id.localeCompare(b.t.id));
  renderSummary(rows);
  $("grid").replaceChildren(...rows.map(tile));
  renderDetail();
}

function renderSummary(rows) {
  const count = (pred) => rows.filter(pred).length;
  const off = count((r) => r.fl.some((f) => f[0] === "OFFLINE"));
  const items = [["tables", "TABLES", rows.length], ["online", "ONLINE", rows.length - off], ["offline", "OFFLINE", off],
    ["alerts", "NEED A PERSON", count((r) => r.need === "attention")],
    ["paused", "PAUSED / CLOSED", count((r) => r.fl.some((f) => ["PAUSED", "CLOSED", "CLOSING"].includes(f[0])))],
    ["unsettled", "RESULTS UNSETTLED", rows.reduce((n, r) => n + ((r.t.state && r.t.state.unsettled) || 0), 0)]];
  $("summary").replaceChildren(...items.map(([k, label, n]) => el("span", { class: "sum", "data-kind": k, "data-n": n }, `${label} ${n}`)));
}

function tile({ t, fl, need: n }) {
  const st = t.state || {};
  const phase = st.phase ? `${st.phase.replace("_", " ")} ${sinceText(st.phase_since)}` : "no round yet";
  return el("button", { class: "tile", type: "button", "data-table": t.id, "data-need": n, "data-online": online(t) ? "yes" : "no",
    "aria-pressed": ui.selected === t.id ? "true" : "false", onclick: () => { ui.selected = ui.selected === t.id ? null : t.id; render(); } },
  el("div", { class: "tile-head" }, el("span", {}, t.id), el("span", {}, online(t) ? "● ONLINE" : "✗ OFFLINE")),
  el("div", { class: "tile-line" }, `${t.game} · ${st.node_id || "?"}`),
  el("div", { class: "tile-line" }, phase),
  el("div", { class: "tile-line" }, `dealer: ${st.dealer || "—"}`),
  el("div", { class: "tile-flags" }, ...fl.map(([f, why]) => el("span", { class: "flag", "data-flag": f, title: why }, why && f !== "OFFLINE" ? `${f} ${why}`.slice(0, 28) : f))));
}

function renderDetail() {
  const box = $("detail");
  const id = ui.selected;
  $("body").classList.toggle("with-detail", !!id);
  box.hidden = !id;
  if (!id) return;
  const t = table(id);
  const st = t.state || {};
  const p = t.prompt;
  const parts = [];
  parts.push(el("h1", {}, `${t.id} — ${t.game}`, " ", el("span", { class: "pill", "data-state": online(t) ? "online" : "offline" }, online(t) ? "ONLINE" : "OFFLINE")));
  parts.push(el("section", { class: "prompt", "data-kind": p ? p.kind : "NONE" },
    el("div", { class: "prompt-kind" }, p ? p.kind : "NO PROMPT"), el("div", { class: "prompt-main" }, (p && p.position) || (st.phase || "—")),
    el("div", { class: "prompt-detail" }, p ? p.message : "")));
  const facts = [`round ${st.round_id || "—"}`, `phase ${st.phase || "—"} for ${sinceText(st.phase_since) || "?"}`, `dealer ${st.dealer || "—"}`,
    `results unsettled ${st.unsettled || 0}`];
  if (st.betting_closes_at && st.phase === "BETTING_OPEN") facts.push(`betting closes in ${mmss(clock.left(st.betting_closes_at))}`);
  if (st.decision_closes_at) facts.push(`decision closes in ${mmss(clock.left(st.decision_closes_at))}`);
  if (st.turn) facts.push(`turn ${st.turn.turn}: ${st.turn.player_id || "?"} (${mmss(clock.left(st.turn.closes_at || 0))})`);
  if (st.paused) facts.push(`PAUSED: ${st.paused_reason || ""}`);
  parts.push(el("div", { class: "panel" }, facts.join(" · ")));
  parts.push(acts(t));
  parts.push(answersPanel());
  const dealt = Array.isArray(st.dealt) ? st.dealt : [];
  parts.push(el("section", { class: "panel" }, el("h2", {}, "CARDS (AS THE PUBLIC SEES THEM)"),
    dealt.length ? el("div", { class: "cards" }, ...cardRows(dealt, st.cards || {})) : el("div", { class: "empty" }, "none")));
  parts.push(figuresPanel(t));
  parts.push(roundsPanel(t));
  parts.push(el("section", { class: "panel" }, el("h2", {}, "TIMELINE"),
    el("ol", { class: "log" }, ...t.events.map((ev) => el("li", { class: "ev", "data-event": ev.event },
      el("span", { class: "ev-time mono" }, timeOfDay(ev.at)), el("span", { class: "ev-name" }, ev.event),
      el("span", { class: "ev-text" }, JSON.stringify(ev.data || {}).slice(0, 160)))))));
  box.replaceChildren(...parts);
}

function figuresPanel(t) {
  const h = t.history;
  if (!h || !h.dealers.length) return el("section", { class: "panel" }, el("h2", {}, "DEALERS"), el("div", { class: "empty" }, "no figures yet"));
  const rows = h.dealers.map((d) => el("tr", { "data-dealer": d.dealer || "" },
    el("td", {}, (d.dealer || "(nobody logged on)") + (d.on_shift ? " ● on shift" : "")), el("td", {}, d.rounds), el("td", {}, d.cards),
    el("td", {}, d.rescans), el("td", {}, d.cards ? (d.rescans * 100 / d.cards).toFixed(1) : "—"), el("td", {}, d.mistakes),
    el("td", {}, timeOfDay(d.since))));
  return el("section", { class: "panel" }, el("h2", {}, `DEALERS AT ${t.id} SINCE ${timeOfDay(h.since)}`),
    el("table", { class: "figures" }, el("thead", {}, el("tr", {}, ...["dealer", "rounds", "cards", "rescans", "per 100 cards", "mistakes refused", "since"].map((x) => el("th", {}, x)))),
      el("tbody", {}, ...rows)));
}

function roundsPanel(t) {
  const h = t.history;
  if (!h || !h.rounds.length) return el("section", { class: "panel" }, el("h2", {}, "LAST ROUNDS"), el("div", { class: "empty" }, "none yet"));
  return el("section", { class: "panel" }, el("h2", {}, "LAST ROUNDS"),
    el("table", { class: "figures" }, el("thead", {}, el("tr", {}, ...["round", "outcome", "winner", "dealers", "cards", "rescans", "mistakes", "finished"].map((x) => el("th", {}, x)))),
      el("tbody", {}, ...h.rounds.map((r) => el("tr", { "data-round-id": r.round_id, "data-outcome": r.outcome },
        el("td", { class: "mono" }, r.round_id), el("td", {}, r.outcome + (r.reason ? `: ${r.reason}` : "")), el("td", {}, r.winner || "—"),
        el("td", {}, (r.dealers || []).join(", ") || "—"), el("td", {}, r.dealt), el("td", {}, r.rescans), el("td", {}, r.mistakes),
        el("td", {}, timeOfDay(r.finished_at)))))));
}

/* -- the supervisor's acts ------------------------------------------------------------------------------- */

function acts(t) {
  const box = el("section", { class: "panel acts", "data-acts": t.id });
  if (!ui.supervisor) {
    box.append(el("div", { class: "acts-note" }, "Read only: log in as supervisor-<id> to act on a table."));
    return box;
  }
  if (!signingKey) box.append(el("div", { class: "acts-note" }, "Load your key file (top bar) to sign acts."));
  const st = t.state || {};
  for (const [name, a] of Object.entries(ACTS)) {
    const b = el("button", { class: `${a.cls}`, type: "button", "data-act": name, onclick: () => confirmAct(t.id, name) }, a.label);
    b.disabled = !signingKey || !ui.connected || (a.round && !st.round_id);
    box.append(b);
  }
  return box;
}

function answersPanel() {
  const items = ui.answers.slice(-6).reverse();
  return el("section", { class: "panel" }, el("h2", {}, "YOUR ACTS"),
    items.length ? el("div", { class: "answers" }, ...items.map((a) => {
      const status = a.status === "SENT" && clock.now() - a.sentAt > 5000 ? "NO ANSWER YET" : a.status;
      const mark = { ACCEPTED: "✓", REJECTED: "✗", SENT: "…", "NO ANSWER YET": "?", "NOT SENT": "✗" }[status] || "";
      return el("div", { class: "answer", "data-status": status.replace(/ /g, "_"), "data-command-id": a.command_id, "data-type": a.type },
        el("span", { class: "answer-mark" }, `${mark} ${status}`), el("span", { class: "answer-what" }, a.label),
        a.reason ? el("span", { class: "answer-reason" }, a.reason) : null);
    })) : el("div", { class: "empty" }, "none yet"));
}

/** The unsigned command of an act (docs/mqtt-topics.md §10.1). */
function buildAct(tableId, name, reason) {
  const a = ACTS[name];
  const st = table(tableId).state || {};
  const cmd = { type: a.type, command_id: randomId("pit-"), supervisor: ui.supervisor, table_id: tableId };
  if (a.round) cmd.round_id = st.round_id;
  cmd.issued_at = Math.round(clock.now()); // the backend's clock, so a skewed browser is not refused as stale
  if (reason) cmd.reason = reason;
  return cmd;
}

function confirmAct(tableId, name) {
  const a = ACTS[name];
  const st = table(tableId).state || {};
  const reason = el("input", { class: "keypad-input", maxlength: 200, "aria-label": "reason", placeholder: a.reason ? "reason (required)" : "reason (optional)" });
  const note = el("div", { class: "modal-note" }, a.round ? `Round ${st.round_id}: every accepted bet is refunded.` : "");
  $("modal-title").textContent = `${a.label} — TABLE ${tableId}`;
  $("modal-body").replaceChildren(el("div", { class: "modal-note" }, `Signed by ${ui.supervisor} with your key.`), reason, note);
  $("modal-actions").replaceChildren(
    el("button", { class: "big", type: "button", onclick: closeModal }, "CANCEL"),
    el("button", { class: `big ${a.cls}`, type: "button", "data-confirm": name, onclick: async () => {
      const why = reason.value.trim();
      if (a.reason && !why) {
        note.textContent = "A reason is required: it is journaled and shown in the result.";
        note.classList.add("bad");
        return;
      }
      closeModal();
      await sendAct(tableId, buildAct(tableId, name, why || null), a.label);
    } }, `${a.label} NOW`));
  $("modal").hidden = false;
  reason.focus();
}

function closeModal() { $("modal").hidden = true; }

async function sendAct(tableId, cmd, label, { sign = true } = {}) {
  const rec = { command_id: cmd.command_id, type: cmd.type, label: `${label} ${tableId}`, status: "SENT", reason: null, sentAt: clock.now() };
  pending.set(cmd.command_id, rec);
  ui.answers.push(rec);
  try {
    const signed = sign ? await signCommand(cmd, signingKey) : cmd;
    await link.publish(topicOf.supervisor(tableId), signed);
  } catch (e) {
    Object.assign(rec, { status: "NOT SENT", reason: String(e.message || e) });
  }
  render();
  return rec;
}

/** For the browser tests: what the page does, in steps (build, sign, publish), so a test can
 * alter a command between signing and sending. It adds nothing the page's user cannot do. */
window.floorActs = {
  build: buildAct,
  sign: (cmd) => signCommand(cmd, signingKey),
  publish: (tableId, cmd) => link.publish(topicOf.supervisor(tableId), cmd),
  select: (id) => { ui.selected = id; render(); },
};

async function loadKey(file) {
  try {
    signingKey = await importKeyHex(await file.text());
    ui.keyLoaded = true;
    $("key-state").dataset.state = "online";
    $("key-state").textContent = "LOADED (this page only)";
  } catch (e) {
    signingKey = null;
    ui.keyLoaded = false;
    $("key-state").dataset.state = "offline";
    $("key-state").textContent = "NOT LOADED";
    errors.add(`key file refused: ${e.message || e}`);
  }
  $("key-file").value = ""; // the file is read once; only the non-extractable key stays
  render();
}

/* -- start ----------------------------------------------------------------------------------------------- */

async function start() {
  try {
    const resp = await fetch("/site.json", { cache: "no-store" });
    site = await resp.json();
  } catch (e) {
    errors.add(`cannot read /site.json: ${e.message || e}`);
  }
  for (const t of site.tables || []) table(t.id);
  const form = $("login");
  form.addEventListener("submit", () => whoIs(form.querySelector("[name=user]").value), true);
  const creds = new URLSearchParams(location.hash.slice(1));
  if (creds.get("user")) whoIs(creds.get("user"));
  setupLogin(form, link, "ops");
  $("key-file").addEventListener("change", (e) => { if (e.target.files[0]) loadKey(e.target.files[0]); });
  setInterval(scheduleRender, 1000);
  render();
}

function whoIs(user) {
  ui.user = user;
  ui.supervisor = user.startsWith("supervisor-") ? user.slice("supervisor-".length) : null;
  $("who").textContent = user + (ui.supervisor ? " (supervisor)" : " (read only)");
  $("keyline").hidden = !ui.supervisor;
}

start();
