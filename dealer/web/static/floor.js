/* The pit-boss floor: every table at a glance (the ones needing a person first), one table in
 * detail with its timeline, last rounds and per-dealer figures, and the supervisor's signed acts.
 * Logged in as `ops` it only reads; as `supervisor-<id>` it signs acts in the browser with the
 * supervisor's own key (WebCrypto, docs/mqtt-topics.md §10), which never leaves this page.
 * Protocol 2: each table's retained state carries its prompt and the round events and prompts of
 * each batch (read once per state version); `events` brings the refusals. */
"use strict";

const $ = (id) => document.getElementById(id);
const ui = { connected: false, banner: "DISCONNECTED", errors: [], user: null, supervisor: null, keyLoaded: false,
  tables: {}, statuses: {}, online: {}, answers: [], selected: null };
window.screenState = ui;

const errors = new ErrorList($("errors"), ui);
let site = { tables: [], supervisors: [], node_ids: [] };
let signingKey = null; // a CryptoKey that can sign and can never be read back
const pending = new Map();
const news = new StateNews(); // each state's events and prompts, once

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
    ui.tables[id] = { id, game, state: null, prompt: null, history: null, events: [], rescans: {}, security: 0, lastAlert: null,
      alertsSeen: [], replaced: [], watch: new AlertWatch() };
  }
  return ui.tables[id];
}

const link = new Link({
  banner: $("banner"), state: ui, errors, role: "floor",
  subscriptions: () => {
    // each table's topics exactly (the site's tables), never a wildcard: a broker need not send
    // retained messages to a wildcard subscription (RabbitMQ does not), and the state is retained
    const subs = [];
    for (const t of site.tables) subs.push(topicOf.state(t.id), topicOf.events(t.id), topicOf.history(t.id));
    return [...subs, topicOf.status("+")];
  },
  onMessage,
  onChange: () => scheduleRender(),
  onConnect: () => { ui.statuses = {}; }, // the retained statuses come again with the subscription
});

function onMessage(topic, payload, packet) {
  const read = readMessage(topic, payload, errors);
  if (!read) return;
  const { where, msg } = read;
  if (where.kind === "status") {
    ui.statuses[where.node] = msg;
    scheduleRender();
    return;
  }
  if (!/^[A-Za-z0-9_]{1,32}$/.test(where.table)) return;
  if (!(packet && packet.retain)) clock.seen(msg.at); // a retained copy is as old as its last change: no clock sample
  const t = table(where.table);
  if (where.kind === "state") {
    takeState(t, msg);
  } else if (where.kind === "history") {
    if (newerRetained(msg, t.history, ui.statuses)) t.history = msg;
  } else if (where.kind === "events") {
    takeEvent(t, msg);
  }
  scheduleRender();
}

/** A table state: its batch's events go to the timeline and its ALERTs are counted, once (a
 * retained copy seen again brings nothing); an ALERT a later prompt replaced stays listed until
 * acknowledged. The newest state is what the floor shows, with its prompt. */
function takeState(t, msg) {
  const batch = news.read(msg);
  for (const ev of batch.events) takeEvent(t, ev);
  for (const p of batch.prompts) if (p.kind === "ALERT") takeAlert(t, p);
  for (const a of t.watch.walk(batch.prompts)) {
    if (a.reason === "security") continue; // counted and kept under SECURITY until acknowledged
    t.replaced.push(a);
    if (t.replaced.length > 20) t.replaced.shift();
  }
  if (!newerRetained(msg, t.state, ui.statuses)) return;
  t.state = msg;
  t.prompt = isObj(msg.prompt) ? msg.prompt : null;
}

function takeEvent(t, ev) {
  t.events.unshift(ev);
  if (t.events.length > 100) t.events.pop();
  const d = ev.data || {};
  if (ev.event === "scan_rejected" && ev.round_id) t.rescans[ev.round_id] = (t.rescans[ev.round_id] || 0) + 1;
  const mine = typeof d.command_id === "string" && pending.get(d.command_id);
  if (mine) {
    if (ev.event === "command_accepted" || ev.event === "command_repeated") Object.assign(mine, { status: "ACCEPTED", reason: null });
    else if (ev.event === "rejected") Object.assign(mine, { status: "REJECTED", reason: String(d.reason || "refused") });
  }
}

/** An ALERT, counted once (the first state seen of a table may repeat one); a security one is counted apart. */
function takeAlert(t, p) {
  const key = `${p.round_id}|${p.at}|${p.reason}`;
  if (t.alertsSeen.includes(key)) return;
  t.alertsSeen.push(key);
  if (t.alertsSeen.length > 50) t.alertsSeen.shift();
  t.lastAlert = p;
  if (p.reason === "security") t.security += 1;
}

/* -- what needs a person ---------------------------------------------------------------------------- */

function online(t) {
  const m = t.state;
  return ui.connected && !!m && isCurrent(m, ui.statuses[m.node_id]);
}

function flags(t) {
  const out = [];
  const st = t.state || {};
  const isOn = online(t);
  if (!isOn) out.push(["OFFLINE", t.state ? `node ${t.state.node_id}` : "no data"]);
  if (t.prompt && t.prompt.kind === "ALERT" && isOn) out.push(["ALERT", t.prompt.reason || "alert"]);
  else if (t.replaced.length) out.push(["ALERT", `${t.replaced.length} replaced: ${t.replaced[t.replaced.length - 1].reason || "alert"}`]);
  if (Object.keys(st.links_down || {}).length) out.push(["LINK", Object.keys(st.links_down).join(", ")]);
  if (st.mode && st.mode !== "open") out.push([st.mode.startsWith("closing") ? "CLOSING" : st.mode.toUpperCase(), st.paused_reason || ""]);
  else if (st.paused) out.push(["PAUSED", st.paused_reason || ""]);
  if (t.security) out.push(["SECURITY", `${t.security}`]);
  if (st.unsettled > 0) out.push(["UNSETTLED", `${st.unsettled}`]);
  const rescans = st.round_id ? t.rescans[st.round_id] || 0 : 0;
  if (rescans) out.push(["RESCANS", `${rescans}`]);
  return out;
}

/** How urgently a table needs a person: 0 first (offline, alert, link down), then paused or
 * closed, unsettled results, rescans; 9 for a table that needs nobody. */
const RANK = { OFFLINE: 0, ALERT: 0, LINK: 0, SECURITY: 1, PAUSED: 1, CLOSED: 1, CLOSING: 1, UNSETTLED: 2, RESCANS: 3 };
function rankOf(fl) { return Math.min(9, ...fl.map((f) => RANK[f[0]] ?? 9)); }
function need(fl) {
  const r = rankOf(fl);
  return r === 0 ? "attention" : r < 9 ? "watch" : "ok";
}

/* -- rendering ----------------------------------------------------------------------------------------- */

let renderQueued = false;
let pressedAt = 0; // a finger or button held down: no redraw may take the target away (for 2 s at most)
document.addEventListener("pointerdown", () => { pressedAt = Date.now(); }, true);
document.addEventListener("pointerup", () => { pressedAt = 0; setTimeout(scheduleRender, 50); }, true);
document.addEventListener("pointercancel", () => { pressedAt = 0; }, true);
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    if (pressedAt && Date.now() - pressedAt < 2000) {
      setTimeout(scheduleRender, 200);
      return;
    }
    render();
  });
}

/** Never throws: a part that cannot be drawn is reported on the page, the rest goes on. */
function render() {
  try {
    draw();
  } catch (e) {
    errors.add(`the floor could not be drawn fully: ${e.message || e}`);
  }
}

function draw() {
  const ids = site.tables.map((t) => t.id);
  for (const id of Object.keys(ui.tables)) if (!ids.includes(id)) ids.push(id);
  const rows = ids.map((id) => { const t = table(id); const fl = flags(t); return { t, fl, rank: rankOf(fl), need: need(fl) }; });
  rows.sort((a, b) => a.rank - b.rank || a.t.id.localeCompare(b.t.id));
  for (const r of rows) ui.online[r.t.id] = online(r.t);
  renderSummary(rows);
  $("grid").replaceChildren(...rows.map(tile));
  renderDetail();
}

function renderSummary(rows) {
  const count = (pred) => rows.filter(pred).length;
  const off = count((r) => r.fl.some((f) => f[0] === "OFFLINE"));
  const items = [["tables", "TABLES", rows.length], ["online", "ONLINE", rows.length - off], ["offline", "OFFLINE", off],
    ["alerts", "⚠ NEED A PERSON", count((r) => r.need === "attention")],
    ["paused", "PAUSED / CLOSED", count((r) => r.fl.some((f) => ["PAUSED", "CLOSED", "CLOSING"].includes(f[0])))],
    ["security", "SECURITY ALERTS", rows.reduce((n, r) => n + r.t.security, 0)],
    ["unsettled", "RESULTS UNSETTLED", rows.reduce((n, r) => n + ((r.t.state && r.t.state.unsettled) || 0), 0)]];
  $("summary").replaceChildren(...items.map(([k, label, n]) => el("span", { class: "sum", "data-kind": k, "data-n": n }, `${label} ${n}`)));
}

function tile({ t, fl, need: n }) {
  const st = t.state || {};
  const phase = st.phase ? `${st.phase.replace("_", " ")} ${sinceText(st.phase_since)}` : "no round yet";
  return el("button", { class: "tile", type: "button", "data-table": t.id, "data-need": n, "data-online": online(t) ? "yes" : "no",
    "aria-pressed": ui.selected === t.id ? "true" : "false", onclick: () => { ui.selected = ui.selected === t.id ? null : t.id; render(); } },
  el("div", { class: "tile-head" }, el("span", {}, t.id), el("span", { class: "tile-node" }, online(t) ? "● ONLINE" : "✗ OFFLINE")),
  el("div", { class: "tile-line", title: `node ${st.node_id || "?"}` }, `${t.game} · ${st.node_id || "?"}`),
  el("div", { class: "tile-line tile-phase" }, phase, el("span", { class: "tile-dealer" }, st.dealer || "no dealer")),
  el("div", { class: "tile-flags", title: fl.map(([f, why]) => `${f} ${why}`).join("\n") },
    ...fl.map(([f, why]) => el("span", { class: "flag", "data-flag": f }, ["RESCANS", "UNSETTLED", "SECURITY"].includes(f) ? `${f} ${why}` : f))));
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
    el("div", { class: "prompt-kind" }, p ? p.kind : "NO PROMPT"), el("div", { class: "prompt-main" }, (p && p.position) || ""),
    el("div", { class: "prompt-detail" }, p ? p.message.replace(/^(RESCAN|SUPERVISOR)( \S+)?: /, "") : "")));
  const facts = [`round ${st.round_id || "—"}`, `phase ${st.phase || "—"} for ${sinceText(st.phase_since) || "?"}`, `table ${st.mode || "?"}`,
    `dealer ${st.dealer || "—"}`, `results unsettled ${st.unsettled || 0}`];
  if (st.paused) facts.push(`PAUSED: ${st.paused_reason || ""}`);
  const links = Object.entries(st.links_down || {});
  if (links.length) facts.push("LINK DOWN " + links.map(([k, v]) => `${k}${v ? ` (${v})` : ""}`).join(", "));
  parts.push(el("div", { class: "panel facts" }, facts.join(" · ")));
  if (t.security) {
    parts.push(el("div", { class: "panel security" }, el("span", { class: "error-mark" }, `⚠ ${t.security} SECURITY ALERT(S) since this page opened` +
      (t.lastAlert && t.lastAlert.reason === "security" ? `: ${t.lastAlert.message}` : "")),
    el("button", { class: "small", type: "button", onclick: () => { t.security = 0; render(); } }, "ACKNOWLEDGE")));
  }
  if (t.replaced.length) {
    parts.push(el("div", { class: "panel security", "data-replaced-alerts": t.replaced.length },
      el("span", { class: "error-mark" }, `⚠ ${t.replaced.length} ALERT(S) REPLACED BY THE NEXT PROMPT since this page opened`),
      el("ol", { class: "log" }, ...t.replaced.slice().reverse().map((a) => el("li", { class: "ev warn", "data-reason": a.reason || null },
        el("span", { class: "ev-time mono" }, timeOfDay(a.at)), el("span", { class: "ev-name" }, a.reason || "ALERT"),
        el("span", { class: "ev-text" }, a.message)))),
      el("button", { class: "small", type: "button", onclick: () => { t.replaced = []; render(); } }, "ACKNOWLEDGE")));
  }
  const timers = [];
  if (!st.paused && online(t)) {
    if (st.phase === "BETTING_OPEN" && Number.isInteger(st.betting_closes_at)) timers.push(countdownEl("betting", st.betting_closes_at));
    if (st.phase === "DECISION" && Number.isInteger(st.decision_closes_at)) timers.push(countdownEl("decision", st.decision_closes_at));
    if (st.turn && Number.isInteger(st.turn.closes_at)) timers.push(countdownEl("turn", st.turn.closes_at, [st.turn.player_id, st.turn.street].filter(Boolean).join(", ")));
    if (Number.isInteger(st.confirm_closes_at)) timers.push(countdownEl("exposure window", st.confirm_closes_at));
  }
  if (timers.length) parts.push(el("div", { class: "timers" }, ...timers));
  parts.push(acts(t));
  if (ui.user && ui.user.startsWith("supervisor-")) parts.push(answersPanel());
  const dealt = Array.isArray(st.dealt) ? st.dealt : [];
  parts.push(el("section", { class: "panel" }, el("h2", {}, "CARDS (AS THE PUBLIC SEES THEM)"),
    dealt.length ? el("div", { class: "cards" }, ...cardRows(dealt, st.cards || {})) : el("div", { class: "empty" }, "none")));
  parts.push(figuresPanel(t));
  parts.push(roundsPanel(t));
  parts.push(el("section", { class: "panel" }, el("h2", {}, "TIMELINE (SINCE THIS PAGE OPENED)"),
    t.events.length ? el("ol", { class: "log" }, ...t.events.map(eventLine)) : el("div", { class: "empty" }, "no event yet")));
  const scroll = box.querySelector(".log") ? box.querySelector(".log").scrollTop : 0;
  box.replaceChildren(...parts);
  if (box.querySelector(".log")) box.querySelector(".log").scrollTop = scroll;
  tickCountdowns(box);
}

function figuresPanel(t) {
  const h = t.history;
  if (!h || !h.dealers.length) return el("section", { class: "panel" }, el("h2", {}, "DEALERS"), el("div", { class: "empty" }, "no figures yet"));
  const rows = h.dealers.map((d) => el("tr", { "data-dealer": d.dealer || "" },
    el("td", {}, (d.dealer || "(nobody logged on)") + (d.on_shift ? " ● on shift" : "")), el("td", {}, d.rounds), el("td", {}, d.cards),
    el("td", {}, d.rescans), el("td", { "data-per100": "" }, per100(d.rescans, d.cards)), el("td", {}, d.mistakes),
    el("td", {}, timeOfDay(d.since))));
  return el("section", { class: "panel" }, el("h2", {}, `DEALERS AT ${t.id} (${t.game}) SINCE ${timeOfDay(h.since)}`),
    el("table", { class: "figures" }, el("thead", {}, el("tr", {}, ...["dealer", "rounds", "cards", "rescans", "per 100 cards", "mistakes refused", "since"].map((x) => el("th", {}, x)))),
      el("tbody", {}, ...rows)));
}

/** Rescans per hundred cards, to one decimal (docs/mqtt-topics.md §4.8.1). */
function per100(rescans, cards) {
  return cards ? (Math.round(rescans * 1000 / cards) / 10).toFixed(1) : "—";
}

function roundsPanel(t) {
  const h = t.history;
  if (!h || !h.rounds.length) return el("section", { class: "panel" }, el("h2", {}, "LAST ROUNDS"), el("div", { class: "empty" }, "none yet"));
  return el("section", { class: "panel" }, el("h2", {}, "LAST ROUNDS"),
    el("table", { class: "figures" }, el("thead", {}, el("tr", {}, ...["round", "outcome", "winner", "dealers", "cards", "rescans", "mistakes", "finished"].map((x) => el("th", {}, x)))),
      el("tbody", {}, ...h.rounds.map((r) => el("tr", { "data-round-id": r.round_id, "data-outcome": r.outcome },
        el("td", { class: "mono nowrap", title: r.round_id }, r.round_id), el("td", {}, r.outcome + (r.reason ? `: ${r.reason}` : "")), el("td", {}, r.winner || "—"),
        el("td", {}, (r.dealers || []).join(", ") || "—"), el("td", {}, r.dealt), el("td", {}, r.rescans), el("td", {}, r.mistakes),
        el("td", {}, timeOfDay(r.finished_at)))))));
}

/* -- the supervisor's acts ------------------------------------------------------------------------------- */

function acts(t) {
  const box = el("section", { class: "panel acts", "data-acts": t.id });
  if (!ui.user || !ui.user.startsWith("supervisor-")) {
    box.append(el("div", { class: "acts-note" }, "Read only: log in as supervisor-<id> to act on a table."));
    return box;
  }
  // every disabled act says why
  const why = [!signingKey && "Load your key file (top bar) to sign acts.", !ui.supervisor && "Type your supervisor id (top bar).",
    !ui.connected && "Not connected to the broker."].filter(Boolean);
  for (const w of why) box.append(el("div", { class: "acts-note", "data-why": "" }, "⚠ " + w));
  const st = t.state || {};
  for (const [name, a] of Object.entries(ACTS)) {
    const noRound = a.round && (!st.round_id || ["RESULT", "SETTLED", "CANCELLED", "VOID"].includes(st.phase));
    const b = el("button", { class: `${a.cls}`, type: "button", "data-act": name, onclick: () => confirmAct(t.id, name),
      title: noRound ? "no round in play to void" : a.label }, a.label);
    b.disabled = why.length > 0 || noRound;
    box.append(b);
  }
  return box;
}

function answersPanel() {
  const items = answersToShow(ui.answers, 6);
  return el("section", { class: "panel answers-panel" }, el("h2", {}, "YOUR ACTS"),
    items.length ? el("div", { class: "answers" }, ...items.map((a) => answerRow(a, { onResend: resendAct, onDismiss: render })))
      : el("div", { class: "empty" }, "none yet"));
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
  const note = el("div", { class: "modal-note" }, a.round ? "Every accepted bet of this round is refunded." : "");
  const facts = el("dl", { class: "modal-facts" },
    el("dt", {}, "TABLE"), el("dd", { "data-fact": "table" }, `${tableId} (${table(tableId).game})`),
    el("dt", {}, "ROUND"), el("dd", { "data-fact": "round" }, a.round ? st.round_id || "—" : `${st.round_id || "none"} (not named: a table act)`),
    el("dt", {}, "ACT"), el("dd", { "data-fact": "act" }, `${a.label} (${a.type})`),
    el("dt", {}, "SIGNED BY"), el("dd", { "data-fact": "supervisor" }, ui.supervisor),
    el("dt", {}, "REASON"), el("dd", {}, reason));
  $("modal-title").textContent = `${a.label} — TABLE ${tableId}?`;
  $("modal-body").replaceChildren(facts, note);
  $("modal-actions").replaceChildren(
    el("button", { class: "big", type: "button", onclick: closeModal }, "✗ CANCEL"),
    el("button", { class: `big ${a.cls}`, type: "button", "data-confirm": name, onclick: async () => {
      const why = reason.value.trim();
      if (a.reason && !why) {
        note.textContent = "✗ A reason is required: it is journaled and shown in the result.";
        note.classList.add("bad");
        return;
      }
      if ([...why].length > 200 || /[\u0000-\u001f\u007f]/.test(why)) {
        note.textContent = "✗ A reason is at most 200 characters, without control characters.";
        note.classList.add("bad");
        return;
      }
      if (!ID_RE.test(ui.supervisor || "")) {
        note.textContent = "✗ No valid supervisor id (top bar).";
        note.classList.add("bad");
        return;
      }
      closeModal();
      await sendAct(tableId, buildAct(tableId, name, why || null), a.label);
    } }, `✓ ${a.label} NOW`));
  $("modal").hidden = false;
  reason.focus();
}

function closeModal() { $("modal").hidden = true; }

document.addEventListener("keydown", (e) => { if (e.key === "Escape") closeModal(); });

async function sendAct(tableId, cmd, label) {
  const rec = { command_id: cmd.command_id, type: cmd.type, label: `${label} ${tableId}`, status: "SENT", reason: null, sentAt: Date.now(),
    table: tableId, signed: null };
  pending.set(cmd.command_id, rec);
  ui.answers.push(rec);
  if (ui.answers.length > 50) pending.delete(ui.answers.shift().command_id);
  try {
    rec.signed = await signCommand(cmd, signingKey);
    await link.publish(topicOf.supervisor(tableId), rec.signed);
  } catch (e) {
    Object.assign(rec, { status: "NOT SENT", reason: String(e.message || e) });
  }
  render();
  return rec;
}

/** The very same signed message again (same id, issued_at, signature): the backend applies it once. */
async function resendAct(rec) {
  if (!rec.signed) return;
  Object.assign(rec, { status: "SENT", reason: null, sentAt: Date.now() });
  try {
    await link.publish(topicOf.supervisor(rec.table), rec.signed);
  } catch (e) {
    Object.assign(rec, { status: "NOT SENT", reason: String(e.message || e) });
  }
  render();
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
    if (file.size > 4096) throw new Error(`${file.name} is ${file.size} bytes: not a key file (a key file holds 64 hex digits)`);
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
    $("key-state").textContent = `NOT LOADED: ${String(e.message || e).slice(0, 80)}`;
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
  $("supervisor-id").addEventListener("input", (e) => {
    const id = e.target.value.trim();
    ui.supervisor = ID_RE.test(id) ? id : null;
    e.target.toggleAttribute("data-bad", !ui.supervisor);
    scheduleRender();
  });
  setInterval(scheduleRender, 1000);
  setInterval(() => { try { tickCountdowns($("detail")); } catch (e) { errors.add(`the clocks could not be drawn: ${e.message || e}`); } }, 250);
  render();
}

/** ops reads only; supervisor-<id> may act, as <id> (the id can be typed when it differs). */
function whoIs(user) {
  ui.user = user;
  ui.supervisor = user.startsWith("supervisor-") ? user.slice("supervisor-".length) : null;
  $("who").textContent = user + (ui.supervisor ? " (supervisor)" : " (read only)");
  $("keyline").hidden = !ui.supervisor;
  $("supervisor-id").value = ui.supervisor || "";
}

start();
