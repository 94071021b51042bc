/* The dealer station for one table (/station?table=TP1): what to do next, big; every rescan,
 * alert and refusal unmissable; the cards as a station may see them; the running windows as
 * countdowns from the backend's deadlines; the station's own commands with their answers.
 * A client of the published protocol only (docs/mqtt-topics.md), logged in as station-<table>.
 * Protocol 2: the table's retained state carries the prompt to show, and the round events and
 * prompts of each batch (read once per state version); `events` brings the refusals. */
"use strict";

const TABLE = new URLSearchParams(location.search).get("table") || "";
const $ = (id) => document.getElementById(id);

const ui = {
  table: TABLE, connected: false, banner: "DISCONNECTED", errors: [], online: false,
  lastPrompt: null, state: null, history: null, statuses: {},
  answers: [], promptsSeen: [], events: [], alerts: [],
};
window.screenState = ui;

const errors = new ErrorList($("errors"), ui);
/** Every ALERT a later prompt replaced, until the dealer dismisses it (an ALERT is never hidden). */
const alerts = new ErrorList($("alerts"), ui, { key: "alerts", noun: "SUPERVISOR ALERT", mark: "⚠ ALERT" });
const news = new StateNews(); // each state's events and prompts, once
const alertWatch = new AlertWatch();
const roundCards = { round: null, dealt: [], cards: {} }; // from events, until the state has them
const pending = new Map(); // command_id -> answer record
let lastActionsKey = "";
let lastTimersKey = "";

const link = new Link({
  banner: $("banner"), state: ui, errors, role: `station-${TABLE}`,
  subscriptions: () => [topicOf.state(TABLE), topicOf.events(TABLE), topicOf.history(TABLE), topicOf.status("+")],
  onMessage,
  onChange: () => render(),
  onConnect: () => { ui.statuses = {}; }, // what the broker said before may be gone with it: its retained status comes again
});

function onMessage(topic, payload, packet) {
  const read = readMessage(topic, payload, errors);
  if (!read) return;
  const { where, msg } = read;
  if (where.kind === "status") {
    ui.statuses[where.node] = msg;
  } else if (where.table !== TABLE) {
    return;
  } else {
    if (!(packet && packet.retain)) clock.seen(msg.at); // a retained copy is as old as its last change: no clock sample
    if (where.kind === "state") takeState(msg);
    else if (where.kind === "history") { if (newerRetained(msg, ui.history, ui.statuses)) ui.history = msg; }
    else if (where.kind === "events") takeEvent(msg);
  }
  render();
}

/** A table state: its batch's events go to the log and its prompts to the record, once (a
 * retained copy seen again brings nothing); the newest state is what the screen shows, its
 * `prompt` the prompt to act on (§4.8's currentness rule decides whether it may be followed). */
function takeState(msg) {
  const batch = news.read(msg);
  for (const ev of batch.events) takeEvent(ev);
  for (const p of batch.prompts) {
    ui.promptsSeen.push({ kind: p.kind, reason: p.reason || null, position: p.position || null,
      round_id: p.round_id || null, at: p.at });
    if (ui.promptsSeen.length > 500) ui.promptsSeen.shift();
  }
  for (const a of alertWatch.walk(batch.prompts)) alerts.add(alertText(a));
  if (!newerRetained(msg, ui.state, ui.statuses)) return;
  ui.state = msg;
  ui.lastPrompt = isObj(msg.prompt) ? msg.prompt : null;
}

function alertText(p) {
  const why = p.message.replace(/^SUPERVISOR: /, "") || REASON_TEXT[p.reason] || p.reason || "";
  return `CALL SUPERVISOR — ${timeOfDay(p.at)}${p.position ? ` at ${p.position}` : ""}: ${why} (replaced by the next prompt)`;
}

function takeEvent(ev) {
  ui.events.unshift(ev);
  if (ui.events.length > 50) ui.events.pop();
  const d = ev.data || {};
  if (ev.round_id && ev.round_id !== roundCards.round && ev.event !== "rejected") {
    Object.assign(roundCards, { round: ev.round_id, dealt: [], cards: {} });
  }
  if (ev.event === "card_registered" && typeof d.position === "string") {
    if (!roundCards.dealt.includes(d.position)) roundCards.dealt.push(d.position);
    if (d.card) roundCards.cards[d.position] = d.card;
  } else if ((ev.event === "cards_revealed" || ev.event === "card_exposed") && typeof d === "object") {
    if (d.cards && typeof d.cards === "object") Object.assign(roundCards.cards, d.cards);
    if (typeof d.position === "string" && d.card) roundCards.cards[d.position] = d.card;
  }
  const cid = typeof d.command_id === "string" ? d.command_id : null;
  const mine = cid && pending.get(cid);
  if (mine) {
    if (ev.event === "command_accepted" || ev.event === "command_repeated") Object.assign(mine, { status: "ACCEPTED", reason: null });
    else if (ev.event === "rejected") Object.assign(mine, { status: "REJECTED", reason: String(d.reason || "refused") });
  }
  const log = $("log");
  log.prepend(eventLine(ev));
  while (log.children.length > 50) log.lastChild.remove();
}

/* -- what the backend says now ------------------------------------------------------------------ */

/** §4.8: the retained state (and the prompt it carries) may be acted on only while it is current. */
function backendNow() {
  const msgs = [ui.state].filter(Boolean);
  if (!ui.connected) return { online: false, node: (msgs[0] && msgs[0].node_id) || "?", why: "no broker: its status is unknown" };
  if (!msgs.length) return { online: false, node: "?", why: "no word from the backend yet" };
  for (const m of msgs) {
    const status = ui.statuses[m.node_id];
    if (isCurrent(m, status)) continue;
    const node = m.node_id || "?";
    if (m.stale) return { online: false, node, why: `backend ${node} stopped` };
    if (!status) return { online: false, node, why: `no status from backend ${node}` };
    if (!status.online) return { online: false, node, why: `backend ${node} is offline` };
    return { online: false, node, why: `backend ${node} reconnected: catching up` };
  }
  return { online: true, node: msgs[0].node_id };
}

/** What stops dealing, in the order a dealer must hear it; null when nothing does. */
function blockerNow(backend) {
  if (!ui.connected) return ui.banner === "LOGIN REFUSED" ? "LOGIN REFUSED — call the supervisor"
    : "BROKER DOWN — do not deal";
  if (!backend.online) return `BACKEND OFFLINE (${backend.node}) — do not deal: ${backend.why}`;
  const down = Object.entries((ui.state && ui.state.links_down) || {});
  const scanner = down.filter(([k]) => k.startsWith("scanner:"));
  if (scanner.length) return "SCANNER LINK DOWN: " + scanner.map(([k, v]) => `${k.slice(8)}${v ? ` (${v})` : ""}`).join(", ") + " — do not deal";
  if (down.length) return "LINK DOWN: " + down.map(([k, v]) => `${k}${v ? ` (${v})` : ""}`).join(", ");
  return null;
}

/* -- rendering ----------------------------------------------------------------------------------- */

/** Never throws: a part that cannot be drawn is reported on the page, the rest goes on. */
function render() {
  try {
    draw();
  } catch (e) {
    errors.add(`the screen could not be drawn fully: ${e.message || e}`);
  }
}

function draw() {
  const st = ui.state;
  const backend = backendNow();
  ui.online = backend.online;
  $("table-id").textContent = TABLE;
  $("game").textContent = st ? st.game : "";
  $("round-id").textContent = st && st.round_id ? st.round_id : "—";
  $("phase").textContent = st && st.phase ? st.phase.replace("_", " ") + (st.mode && st.mode !== "open" ? ` · TABLE ${st.mode.replace("_", " ").toUpperCase()}` : "") : "";
  $("dealer-id").textContent = st && st.dealer ? st.dealer : "nobody logged on";
  const b = $("backend");
  b.dataset.state = backend.online ? "online" : "offline";
  b.textContent = backend.online ? `BACKEND ${backend.node} ONLINE` : `BACKEND ${backend.node} OFFLINE`;
  renderPrompt(backend);
  renderCards();
  renderAnswers();
  renderStrip(backend);
  renderTimers();
  tickCountdowns();
}

function faceOf(message) {
  if (/burn/i.test(message)) return "BURN CARD";
  if (/face down/i.test(message)) return "FACE DOWN";
  if (/face up/i.test(message)) return "FACE UP";
  return "";
}

function renderPrompt(backend) {
  const p = ui.lastPrompt;
  const st = ui.state;
  const box = $("prompt");
  const actions = [];
  let kind = "NONE", label = "NO PROMPT YET", main = "—", detail = "";
  if (p) {
    kind = p.kind;
    const step = p.step && p.of ? `step ${p.step} of ${p.of}` : "";
    switch (p.kind) {
      case "NEXT":
        label = "DEAL"; main = p.position || "—";
        detail = [faceOf(p.message), step].filter(Boolean).join(" · ") || p.message;
        break;
      case "CONFIRM":
        label = "CONFIRM"; main = (p.position || "—").replace(/_/g, " "); detail = [p.announce, p.message].filter(Boolean).join(" — ");
        if (p.position) {
          actions.push(button(`✓ CONFIRM ${main}`, "big go", () => send("dealer_confirm", { round_id: p.round_id, step: p.position }),
            { "data-confirm-step": p.position }));
        }
        if (p.position === "LAST_CARD" && !(st && st.confirm_closes_at)) {
          const buttons = [];
          exposeButtons(buttons, p.round_id);
          if (buttons.length) actions.push(el("span", { class: "timer-actions-label" }, "REPORT EXPOSED CARD:"), ...buttons);
        }
        break;
      case "RESCAN":
        label = "RESCAN"; main = p.position || "—";
        // the backend's own words say why (and name the card when it may be named)
        detail = (p.message.replace(/^RESCAN \S+: /, "") || REASON_TEXT[p.reason] || p.reason || "") +
          (p.count ? ` — attempt ${p.count}` : "");
        break;
      case "ALERT":
        label = "CALL SUPERVISOR"; main = p.position ? `STOPPED AT ${p.position}` : "STOP DEALING";
        detail = p.message.replace(/^SUPERVISOR: /, "") || REASON_TEXT[p.reason] || p.reason || "";
        break;
      case "WAIT":
        if (st && st.phase === "BETTING_OPEN" && st.round_id === p.round_id) {
          label = "BETTING OPEN"; main = "DO NOT DEAL";
          detail = Number.isInteger(st.betting_closes_at)
            ? el("span", {}, "betting closes in ", el("span", { class: "countdown mono", "data-deadline": st.betting_closes_at }, ""))
            : "players are betting";
          actions.push(button("CLOSE BETTING", "big", () => send("close_betting", { round_id: st.round_id, by: "dealer" })));
        } else {
          label = "WAIT"; main = "DO NOT DEAL"; detail = p.announce ? `${p.message} — say: “${p.announce}”` : p.message;
        }
        break;
      case "REJECTED":
        label = "CARD REJECTED"; main = "KEEP IT ASIDE"; detail = p.message;
        break;
      case "DONE":
        label = "ROUND COMPLETE"; main = p.reason ? (st && st.outcome === "VOIDED" ? "VOIDED" : "CANCELLED")
          : (st && st.winner ? `WINNER ${st.winner}` : "DONE");
        detail = p.announce ? `${p.message} — say: “${p.announce}”` : p.message;
        break;
      case "PAUSED":
        label = "PAUSED"; main = "DO NOT DEAL"; detail = p.message;
        break;
      case "CLOSED":
        label = "TABLE CLOSED"; main = "NO ROUNDS"; detail = p.message;
        break;
      default:
        label = p.kind; main = p.position || ""; detail = p.message;
    }
  }
  box.dataset.kind = kind;
  box.dataset.reason = (p && p.reason) || "";
  box.dataset.position = (p && p.position) || "";
  $("prompt-kind").textContent = label;
  $("prompt-main").textContent = main;
  $("prompt-main").toggleAttribute("data-long", main.length > 7);
  $("prompt-detail").replaceChildren(detail);
  // the buttons are replaced only when they change: a finger on one must not lose it to a redraw
  const actionsKey = actions.map((a) => a.textContent).join("|") + `|${p && p.round_id}`;
  if (actionsKey !== lastActionsKey) {
    lastActionsKey = actionsKey;
    $("prompt-actions").replaceChildren(...actions);
  }
  const block = blockerNow(backend);
  const blocker = $("blocker");
  blocker.hidden = !block;
  blocker.textContent = block || "";
  box.dataset.blocked = block ? "yes" : "no";
}

/** Stud's exposure window: one REPORT button per 7th-street card dealt (P<seat>.7). */
function exposeButtons(actions, roundId) {
  const dealt = dealtNow().dealt.filter((pos) => /^P\d+\.7$/.test(pos));
  for (const pos of dealt) {
    actions.push(button(`⚑ ${pos}`, "big warn", () => send("card_exposed", { round_id: roundId, position: pos }),
      { "data-expose": pos, "aria-label": `report ${pos} exposed` }));
  }
}

function dealtNow() {
  const st = ui.state;
  if (st && st.round_id && (st.round_id === roundCards.round || !roundCards.round)) {
    const dealt = Array.isArray(st.dealt) && st.dealt.length >= roundCards.dealt.length ? st.dealt : roundCards.dealt;
    return { dealt, cards: { ...roundCards.cards, ...st.cards } };
  }
  return { dealt: roundCards.dealt, cards: roundCards.cards };
}

function renderCards() {
  const { dealt, cards } = dealtNow();
  const box = $("cards");
  if (!dealt.length) {
    box.replaceChildren(el("div", { class: "empty" }, "no card registered yet"));
    return;
  }
  box.toggleAttribute("data-many", dealt.length > 24); // a full stud table: smaller tiles, still every position
  box.replaceChildren(...cardRows(dealt, cards));
}

let lastAnswersKey = "";
function renderAnswers() {
  const box = $("answers");
  const items = answersToShow(ui.answers, 6);
  const key = items.map((a) => `${a.command_id}:${answerStatus(a)}`).join("|");
  if (key === lastAnswersKey && box.childElementCount) return; // unchanged: keep the buttons under the finger
  lastAnswersKey = key;
  if (!items.length) {
    box.replaceChildren(el("div", { class: "empty" }, "no command sent yet"));
    return;
  }
  box.replaceChildren(...items.map((a) => answerRow(a, { onResend: resend, onDismiss: renderAnswers })));
}

function renderStrip(backend) {
  const h = ui.history;
  const box = $("strip");
  if (!h || !h.rounds.length) {
    box.replaceChildren(el("div", { class: "empty" }, "no round finished yet"));
    return;
  }
  const current = backend.online && isCurrent(h, ui.statuses[h.node_id]);
  box.dataset.current = current ? "yes" : "no";
  box.replaceChildren(current ? "" : el("div", { class: "empty" }, "⚠ from a backend that is not online: may be old"), ...h.rounds.slice(0, 8).map((r) => el("div", { class: "strip-round", "data-outcome": r.outcome, "data-round-id": r.round_id },
    el("span", { class: "strip-id mono" }, r.round_id.split("-").pop()),
    el("span", { class: "strip-outcome" }, r.outcome === "COMPLETED" ? `WIN ${r.winner || "—"}` : r.outcome),
    el("span", { class: "strip-dealer" }, (r.dealers || []).join(", ") || "no dealer"),
    r.rescans ? el("span", { class: "strip-rescans" }, `${r.rescans} rescan${r.rescans > 1 ? "s" : ""}`) : null)));
}

/** The running windows, from the backend's deadlines. Rebuilt only when a window opens or
 * closes (a finger on REPORT EXPOSED must not lose its button); tick() moves the clocks. */
function renderTimers() {
  const st = ui.state;
  const want = [];
  if (st && ui.online && !st.paused) {
    if (st.phase === "BETTING_OPEN") want.push(["betting", st.betting_closes_at, ""]);
    if (st.phase === "DECISION") want.push(["decision", st.decision_closes_at, "players decide"]);
    if (st.turn) want.push(["turn", st.turn.closes_at, [st.turn.player_id, st.turn.street].filter(Boolean).join(", ")]);
    if (st.confirm_closes_at) want.push(["exposure window", st.confirm_closes_at, "report an exposed 7th card, then confirm"]);
  }
  const timers = want.filter(([, deadline]) => Number.isInteger(deadline));
  const exposed = st && st.confirm_closes_at ? dealtNow().dealt.filter((pos) => /^P\d+\.7$/.test(pos)) : [];
  const paused = st && st.paused ? st.paused_reason || "paused" : null;
  const key = JSON.stringify([timers, exposed, paused, st && st.round_id]);
  if (key === lastTimersKey) return;
  lastTimersKey = key;
  const rows = timers.map(([name, deadline, who]) => {
    const row = countdownEl(name, deadline, who);
    if (name === "exposure window" && exposed.length) {
      const buttons = [];
      exposeButtons(buttons, st.round_id);
      row.append(el("div", { class: "timer-actions" }, el("span", { class: "timer-actions-label" }, "REPORT EXPOSED CARD:"), ...buttons));
    }
    return row;
  });
  if (paused) rows.push(el("div", { class: "timer paused", "data-timer": "paused" }, el("span", { class: "timer-name" }, `⏸ CLOCKS STOPPED — ${paused}`)));
  $("timers").replaceChildren(...rows);
  tickCountdowns();
}

/** 4 times a second: the countdowns, and a command's answer that is late. */
function tick() {
  try {
    tickCountdowns();
    if (ui.answers.some((a) => a.status === "SENT")) renderAnswers();
  } catch (e) {
    errors.add(`the clocks could not be drawn: ${e.message || e}`);
  }
}

/* -- commands -------------------------------------------------------------------------------------- */

function button(text, cls, onclick, attrs) {
  return el("button", { class: cls, type: "button", onclick, ...attrs }, text);
}

async function send(type, fields) {
  const command = { type, command_id: randomId(`st-${TABLE}-`), ...fields };
  const label = type === "dealer_logon" ? `log on ${fields.dealer_id}` : type.replace("_", " ") + (fields.step ? ` ${fields.step}` : "") + (fields.position ? ` ${fields.position}` : "");
  const rec = { command_id: command.command_id, type, label, status: "SENT", reason: null, sentAt: Date.now(), command };
  pending.set(command.command_id, rec);
  ui.answers.push(rec);
  if (ui.answers.length > 50) pending.delete(ui.answers.shift().command_id);
  await publish(rec);
}

async function publish(rec) {
  try {
    await link.publish(topicOf.station(TABLE), rec.command);
  } catch (e) {
    Object.assign(rec, { status: "NOT SENT", reason: String(e.message || e) });
  }
  renderAnswers();
}

function resend(rec) { // the same command, the same id: the backend applies it once
  Object.assign(rec, { status: "SENT", reason: null, sentAt: Date.now() });
  publish(rec);
}

/* -- the dealer's log-on: an on-ui keypad, no keyboard or mouse needed ----------------------------- */

const KEYS = ["1234567890", "QWERTYUIOP", "ASDFGHJKL-", "ZXCVBNM_.:"];

function openLogon() {
  const input = el("input", { class: "keypad-input mono", maxlength: 64, autocomplete: "off", spellcheck: "false", "aria-label": "dealer id" });
  const keys = el("div", { class: "keypad" });
  for (const row of KEYS) for (const k of row) keys.append(button(k, "key", () => { input.value += k; }, { "data-key": k }));
  const note = el("div", { class: "modal-note" }, "Type your dealer id (letters, digits, - _ . :), then LOG ON.");
  const logOn = () => {
    const id = input.value.trim();
    if (!ID_RE.test(id)) {
      note.textContent = "✗ A dealer id is 1 to 64 letters, digits, - _ . or :";
      note.classList.add("bad");
      return;
    }
    closeModal();
    send("dealer_logon", { dealer_id: id });
  };
  input.addEventListener("keydown", (e) => { if (e.key === "Enter") logOn(); });
  $("modal-title").textContent = `DEALER LOG ON — TABLE ${TABLE}`;
  $("modal-body").replaceChildren(input, keys, note);
  $("modal-actions").replaceChildren(
    button("⌫ DELETE", "big", () => { input.value = input.value.slice(0, -1); }),
    button("CLEAR", "big", () => { input.value = ""; }),
    button("✗ CANCEL", "big", closeModal),
    button("✓ LOG ON", "big go", logOn, { "data-confirm": "logon" }));
  $("modal").hidden = false;
  input.focus();
}

function closeModal() { $("modal").hidden = true; }

document.addEventListener("keydown", (e) => { if (e.key === "Escape") closeModal(); });

/* -- start -------------------------------------------------------------------------------------------- */

if (!/^[A-Za-z0-9_]{1,32}$/.test(TABLE)) {
  errors.add("no table: open this page as /station?table=TABLE_ID");
} else {
  document.title = `Station ${TABLE}`;
  $("login-table").textContent = TABLE;
  $("logon-button").addEventListener("click", openLogon);
  setupLogin($("login"), link, `station-${TABLE}`);
  setInterval(tick, 250);
  setInterval(render, 2000); // statuses and currentness change without a message of this table
  render();
}
