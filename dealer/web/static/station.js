/* The dealer station for one table (/station?table=TP1): what to do next, big; every rescan,
 * alert and refusal unmissable; the cards as a station may see them; the running windows as
 * countdowns from the backend's deadlines; the station's own commands with their answers.
 * A client of the published protocol only (docs/mqtt-topics.md), logged in as station-<table>. */
"use strict";

const TABLE = new URLSearchParams(location.search).get("table") || "";
const $ = (id) => document.getElementById(id);

const ui = {
  table: TABLE, connected: false, banner: "DISCONNECTED", errors: [], online: false,
  lastPrompt: null, state: null, history: null, statuses: {},
  answers: [], promptsSeen: [], events: [],
};
window.screenState = ui;

const errors = new ErrorList($("errors"), ui);
const retained = { prompt: null }; // the retained current prompt (node, session)
let livePrompt = null; // the latest live prompt
const roundCards = { round: null, dealt: [], cards: {} }; // from events, until the state has them
const pending = new Map(); // command_id -> answer record
let lastActionsKey = "";

const RESCAN_TEXT = {
  noread: "the scanner could not read the card", misread: "the scanner misread the card",
  corrupt_frame: "the reader's message arrived damaged", frame_lost: "a message from the reader was lost (sequence gap)",
  device_fault: "the reader reports a fault", foreign_card: "this card is not from this game's deck",
  duplicate_card: "this card was already dealt in this round", forged_frame: "the reader's message failed authentication",
  security: "a command was refused for security", journal_unavailable: "the backend cannot record: stop dealing",
  not_expected: "no card is expected now",
};

const link = new Link({
  banner: $("banner"), state: ui, errors, role: `station-${TABLE}`,
  subscriptions: () => [topicOf.current(TABLE), topicOf.prompts(TABLE), topicOf.state(TABLE), topicOf.events(TABLE),
    topicOf.history(TABLE), topicOf.status("+")],
  onMessage,
  onChange: () => render(),
});

function onMessage(topic, payload) {
  const where = splitTopic(topic);
  if (!where) return;
  let msg;
  try {
    msg = parsePayload(topic, payload);
    if (msg === null) return; // a retained message cleared
    checkMessage(where.kind, msg);
  } catch (e) {
    errors.add(`bad message on ${topic}: ${e.message}`);
    return;
  }
  if (where.kind === "status") {
    ui.statuses[where.node] = msg;
  } else if (where.table !== TABLE) {
    return;
  } else {
    clock.seen(msg.at);
    if (where.kind === "prompts/current") takePrompt(msg, true);
    else if (where.kind === "prompts") takePrompt(msg, false);
    else if (where.kind === "state") takeState(msg);
    else if (where.kind === "history") ui.history = msg;
    else if (where.kind === "events") takeEvent(msg);
  }
  render();
}

function newer(a, b) { // is retained message a newer than b (same table)?
  if (!b) return true;
  if (a.session !== b.session) return (a.at || 0) >= (b.at || 0);
  return (a.version || 0) >= (b.version || 0);
}

function takePrompt(msg, isRetained) {
  if (isRetained) {
    if (!newer(msg, retained.prompt)) return;
    retained.prompt = msg;
  } else {
    livePrompt = msg;
  }
  const shown = currentPrompt();
  if (shown && (!ui.lastPrompt || shown.at !== ui.lastPrompt.at || shown.kind !== ui.lastPrompt.kind ||
      shown.position !== ui.lastPrompt.position || shown.count !== ui.lastPrompt.count)) {
    ui.promptsSeen.push({ kind: shown.kind, reason: shown.reason || null, position: shown.position || null,
      round_id: shown.round_id || null, at: shown.at });
    if (ui.promptsSeen.length > 500) ui.promptsSeen.shift();
  }
  ui.lastPrompt = shown;
}

/** The prompt to act on: the later of the retained one and the live one (live ones carry no session). */
function currentPrompt() {
  const r = retained.prompt;
  if (!livePrompt) return r;
  if (!r) return livePrompt;
  return (livePrompt.at || 0) >= (r.at || 0) ? livePrompt : r;
}

function takeState(msg) {
  if (ui.state && !newer(msg, ui.state)) return;
  ui.state = msg;
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
  appendLog(ev);
}

/* -- what the backend says now ------------------------------------------------------------------ */

function backendNow() {
  const st = ui.state || retained.prompt;
  if (!st) return { online: false, why: "no word from the backend yet" };
  const status = ui.statuses[st.node_id];
  if (isCurrent(st, status)) return { online: true, node: st.node_id };
  if (st.stale) return { online: false, node: st.node_id, why: `backend ${st.node_id} stopped` };
  if (!status) return { online: false, node: st.node_id, why: `no status from backend ${st.node_id}` };
  if (!status.online) return { online: false, node: st.node_id, why: `backend ${st.node_id} is offline` };
  return { online: false, node: st.node_id, why: `backend ${st.node_id} reconnected: catching up` };
}

/** What stops dealing, in the order a dealer must hear it; null when nothing does. */
function blockerNow(backend) {
  if (!ui.connected) return ui.banner === "LOGIN REFUSED" ? "LOGIN REFUSED — call the supervisor"
    : "BROKER DOWN — do not deal";
  if (!backend.online) return `BACKEND OFFLINE — do not deal (${backend.why})`;
  const down = Object.entries((ui.state && ui.state.links_down) || {});
  const scanner = down.filter(([k]) => k.startsWith("scanner:"));
  if (scanner.length) return "SCANNER LINK DOWN: " + scanner.map(([k, v]) => `${k.slice(8)}${v ? ` (${v})` : ""}`).join(", ") + " — do not deal";
  if (down.length) return "LINK DOWN: " + down.map(([k, v]) => `${k}${v ? ` (${v})` : ""}`).join(", ");
  return null;
}

/* -- rendering ----------------------------------------------------------------------------------- */

function render() {
  const st = ui.state;
  const backend = backendNow();
  ui.online = backend.online;
  $("table-id").textContent = TABLE;
  $("game").textContent = st ? st.game : "";
  $("round-id").textContent = st && st.round_id ? st.round_id : "—";
  $("phase").textContent = st && st.phase ? st.phase.replace("_", " ") : "";
  $("dealer-id").textContent = st && st.dealer ? st.dealer : "nobody logged on";
  const b = $("backend");
  b.dataset.state = backend.online ? "online" : "offline";
  b.textContent = backend.online ? `BACKEND ${backend.node} ONLINE` : "BACKEND OFFLINE";
  renderPrompt(backend);
  renderCards();
  renderAnswers();
  renderStrip();
  tick();
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
        label = "CONFIRM"; main = p.position || "—"; detail = p.message;
        if (p.position) actions.push(button(`CONFIRM ${p.position}`, "big go", () => send("dealer_confirm", { round_id: p.round_id, step: p.position })));
        if (p.position === "LAST_CARD") exposeButtons(actions, p.round_id);
        break;
      case "RESCAN":
        label = "RESCAN"; main = p.position || "—";
        // the backend's own words say why (and name the card when it may be named)
        detail = p.message.replace(/^RESCAN \S+: /, "") + (p.count > 1 ? ` — attempt ${p.count}` : "");
        break;
      case "ALERT":
        label = "CALL SUPERVISOR"; main = p.position ? `STOPPED AT ${p.position}` : "STOP DEALING";
        detail = p.message.replace(/^SUPERVISOR: /, "");
        break;
      case "WAIT":
        if (st && st.phase === "BETTING_OPEN" && st.round_id === p.round_id) {
          label = "BETTING OPEN"; main = "DO NOT DEAL"; detail = "players are betting";
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
  $("prompt-detail").textContent = detail;
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

function exposeButtons(actions, roundId) {
  const dealt = dealtNow().dealt.filter((pos) => /^P\d+\.7$/.test(pos));
  for (const pos of dealt) actions.push(button(`${pos} WAS EXPOSED`, "big warn", () => send("card_exposed", { round_id: roundId, position: pos })));
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
  box.replaceChildren(...cardRows(dealt, cards));
}

let lastAnswersKey = "";
function renderAnswers() {
  const box = $("answers");
  const items = ui.answers.slice(-6).reverse();
  const key = items.map((a) => `${a.command_id}:${a.status}:${a.status === "SENT" && clock.now() - a.sentAt > 5000}`).join("|");
  if (key === lastAnswersKey && box.childElementCount) return; // unchanged: keep the buttons under the finger
  lastAnswersKey = key;
  if (!items.length) {
    box.replaceChildren(el("div", { class: "empty" }, "no command sent yet"));
    return;
  }
  box.replaceChildren(...items.map((a) => {
    const late = a.status === "SENT" && clock.now() - a.sentAt > 5000;
    const status = late ? "NO ANSWER YET" : a.status;
    const mark = { ACCEPTED: "✓", REJECTED: "✗", SENT: "…", "NO ANSWER YET": "?", "NOT SENT": "✗" }[status] || "";
    const row = el("div", { class: "answer", "data-status": status.replace(/ /g, "_"), "data-command-id": a.command_id, "data-type": a.type },
      el("span", { class: "answer-mark" }, `${mark} ${status}`), el("span", { class: "answer-what" }, a.label),
      a.reason ? el("span", { class: "answer-reason" }, a.reason) : null);
    if (late) row.append(button("SEND AGAIN", "small", () => resend(a)));
    return row;
  }));
}

function renderStrip() {
  const h = ui.history;
  const box = $("strip");
  if (!h || !h.rounds.length) {
    box.replaceChildren(el("div", { class: "empty" }, "no round finished yet"));
    return;
  }
  box.replaceChildren(...h.rounds.slice(0, 8).map((r) => el("div", { class: "strip-round", "data-outcome": r.outcome, "data-round-id": r.round_id },
    el("span", { class: "strip-id mono" }, r.round_id.split("-").pop()),
    el("span", { class: "strip-outcome" }, r.outcome === "COMPLETED" ? `WIN ${r.winner || "—"}` : r.outcome),
    el("span", { class: "strip-dealer" }, (r.dealers || []).join(", ") || "no dealer"),
    r.rescans ? el("span", { class: "strip-rescans" }, `${r.rescans} rescan${r.rescans > 1 ? "s" : ""}`) : null)));
}

function eventText(ev) {
  const d = ev.data || {};
  switch (ev.event) {
    case "card_registered": return `${d.position} ${d.card || "face down"}`;
    case "round_opened": return "betting open";
    case "bet_accepted": return `bet ${d.player_id || ""} ${d.bet_type || ""} ${d.stake || ""}${d.seat ? ` seat ${d.seat}` : ""}`;
    case "betting_closed": return `betting closed by ${d.by}: ${d.bets} bet(s)`;
    case "dealer_confirmed": return `${d.step} confirmed${d.by === "timer" ? " (window closed)" : ""}`;
    case "player_acted": return `${d.player_id || ""} ${d.action || ""}${d.total ? ` to ${d.total}` : ""}`;
    case "turn": return `turn ${d.turn}: ${d.player_id || ""}${d.street ? ` (${d.street})` : ""}`;
    case "decision_made": return `${d.player_id || ""} ${d.action || ""}`;
    case "cards_revealed": return "revealed " + Object.entries(d.cards || {}).map(([p, c]) => `${p} ${c}`).join(" ");
    case "round_settled": return "settled";
    case "scan_rejected": return `RESCAN ${d.position}: ${RESCAN_TEXT[d.reason] || d.reason}${d.detail ? ` (${d.detail})` : ""}`;
    case "rejected": return `REFUSED ${d.type}: ${d.reason}`;
    case "round_result": return `RESULT: winner ${d.winner}`;
    case "round_voided": case "round_cancelled": return `${ev.event.slice(6).toUpperCase()}: ${d.reason}`;
    case "dealer_logged_on": return `dealer ${d.dealer_id} logged on`;
    case "command_accepted": return `${d.type} accepted`;
    case "link_down": return `LINK DOWN ${d.link}${d.reason ? `: ${d.reason}` : ""}`;
    case "link_up": return `link up ${d.link}`;
    default: {
      const s = JSON.stringify(d);
      return s === "{}" ? "" : s.slice(0, 120);
    }
  }
}

function appendLog(ev) {
  const d = ev.data || {};
  const warn = ["scan_rejected", "rejected", "round_voided", "round_cancelled", "link_down", "table_paused"].includes(ev.event);
  const item = el("li", { class: `ev${warn ? " warn" : ""}`, "data-event": ev.event, "data-reason": d.reason || null, "data-round-id": ev.round_id || null },
    el("span", { class: "ev-time mono" }, timeOfDay(ev.at)), el("span", { class: "ev-name" }, ev.event), el("span", { class: "ev-text" }, eventText(ev)));
  const log = $("log");
  log.prepend(item);
  while (log.children.length > 50) log.lastChild.remove();
}

/** The running windows, from the backend's deadlines, 4 times a second. */
function tick() {
  const st = ui.state;
  const rows = [];
  if (st && ui.online) {
    const add = (name, deadline, who) => {
      if (!Number.isInteger(deadline)) return;
      const left = clock.left(deadline);
      rows.push(el("div", { class: `timer${left < 5000 ? " urgent" : ""}`, "data-timer": name },
        el("span", { class: "timer-name" }, name.toUpperCase() + (who ? ` — ${who}` : "")),
        el("span", { class: "timer-left mono" }, mmss(left)),
        el("progress", { max: 30000, value: Math.min(left, 30000) })));
    };
    if (st.phase === "BETTING_OPEN") add("betting", st.betting_closes_at);
    if (st.phase === "DECISION") add("decision", st.decision_closes_at, "players decide");
    if (st.turn) add("turn", st.turn.closes_at, [st.turn.player_id, st.turn.street].filter(Boolean).join(", "));
    if (st.confirm_closes_at) add("exposure window", st.confirm_closes_at, "report an exposed 7th card");
    if (st.paused) rows.push(el("div", { class: "timer paused", "data-timer": "paused" }, el("span", { class: "timer-name" }, `CLOCKS STOPPED — ${st.paused_reason || "paused"}`)));
  }
  $("timers").replaceChildren(...rows);
  if (ui.answers.some((a) => a.status === "SENT")) renderAnswers();
}

/* -- commands -------------------------------------------------------------------------------------- */

function button(text, cls, onclick) {
  return el("button", { class: cls, type: "button", onclick }, text);
}

async function send(type, fields) {
  const command = { type, command_id: randomId(`st-${TABLE}-`), ...fields };
  const label = type === "dealer_logon" ? `log on ${fields.dealer_id}` : type.replace("_", " ") + (fields.step ? ` ${fields.step}` : "") + (fields.position ? ` ${fields.position}` : "");
  const rec = { command_id: command.command_id, type, label, status: "SENT", reason: null, sentAt: clock.now(), command };
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
  Object.assign(rec, { status: "SENT", reason: null, sentAt: clock.now() });
  publish(rec);
}

/* -- the dealer's log-on: an on-ui keypad, no keyboard or mouse needed ----------------------------- */

function openLogon() {
  const input = el("input", { class: "keypad-input", maxlength: 64, autocomplete: "off", "aria-label": "dealer id" });
  const keys = el("div", { class: "keypad" });
  for (const k of ["1", "2", "3", "4", "5", "6", "7", "8", "9", "D", "0", "-"]) {
    keys.append(button(k, "key", () => { input.value += k; }));
  }
  keys.append(button("⌫", "key", () => { input.value = input.value.slice(0, -1); }));
  const note = el("div", { class: "modal-note" }, "Type your dealer id (letters, digits, - _ . :).");
  $("modal-title").textContent = "DEALER LOG ON";
  $("modal-body").replaceChildren(input, keys, note);
  $("modal-actions").replaceChildren(
    button("CANCEL", "big", closeModal),
    button("LOG ON", "big go", () => {
      const id = input.value.trim();
      if (!ID_RE.test(id)) {
        note.textContent = "A dealer id is 1 to 64 letters, digits, - _ . or :";
        note.classList.add("bad");
        return;
      }
      closeModal();
      send("dealer_logon", { dealer_id: id });
    }));
  $("modal").hidden = false;
  input.focus();
}

function closeModal() { $("modal").hidden = true; }

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
