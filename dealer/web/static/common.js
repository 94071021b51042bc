/* What both screens share: the broker login, the connection banner, the currentness rule for
 * retained messages (docs/mqtt-topics.md §4.8), each table state's news read once (protocol 2),
 * the backend's clock, card tiles, a bounded error list, and the supervisor's signing (§10.2). Plain browser JS, no build step: the server's CSP
 * allows only scripts from this origin, so nothing here is inline. */
"use strict";

const PREFIX = "studio/v1";
const MAX_PAYLOAD = 128 * 1024; // the backend publishes nothing larger ([service] max_message_bytes): a bigger one is an error, not data
const ID_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/* Protocol 2: a table's one public message is its retained `state`, which carries the current
 * station prompt and the round events and prompts of the batch it follows; `events` carries only
 * refusals (`rejected`). The screens subscribe to each table's topics exactly, never through a
 * wildcard: a broker need not send retained messages to a wildcard subscription (RabbitMQ does not). */
const topicOf = {
  state: (t) => `${PREFIX}/tables/${t}/state`,
  events: (t) => `${PREFIX}/tables/${t}/events`,
  history: (t) => `${PREFIX}/tables/${t}/history`,
  station: (t) => `${PREFIX}/tables/${t}/station`,
  supervisor: (t) => `${PREFIX}/tables/${t}/supervisor`,
  status: (n) => `${PREFIX}/backends/${n}/status`,
};

/** The table and the kind ("state", "events", "history" ...) of a table topic, or null. */
function splitTopic(topic) {
  const p = topic.split("/");
  if (p.length < 5 || p[0] !== "studio" || p[1] !== "v1") return null;
  if (p[2] === "backends" && p.length === 5) return { node: p[3], kind: "status" };
  if (p[2] !== "tables") return null;
  return { table: p[3], kind: p.slice(4).join("/") };
}

/** DOM helper: el("div", {class: "x", "data-k": "v"}, child, "text", ...). */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function randomId(prefix) {
  const a = new Uint8Array(8);
  crypto.getRandomValues(a);
  return prefix + Array.from(a, (b) => b.toString(36).padStart(2, "0")).join("").slice(0, 14);
}

/* -- the backend's clock -------------------------------------------------------------------- */

/** Deadlines are the backend's epoch ms. The browser's clock may be off: the offset is the
 * smallest (arrival − at) over the last live messages, i.e. the skew plus the shortest delivery
 * (negative when the backend's clock is ahead). Retained copies are left out: their `at` is
 * their last change, not their sending. */
const clock = {
  offset: 0,
  samples: [],
  seen(at) {
    if (!Number.isInteger(at)) return;
    this.samples.push(Date.now() - at);
    if (this.samples.length > 50) this.samples.shift();
    this.offset = Math.min(...this.samples);
  },
  now() { return Date.now() - this.offset; },
  left(deadline) { return Math.max(0, deadline - this.now()); },
};

function mmss(ms) {
  const s = Math.ceil(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

function sinceText(at) {
  if (!Number.isInteger(at)) return "";
  return mmss(Math.max(0, clock.now() - at));
}

/** The length of each window, as first seen (the backend publishes only the deadline): the bar's full width. */
const windowLength = new Map();

/** A countdown: "m:ss" and a bar, kept up to date 4 times a second by tickCountdowns(). */
function countdownEl(name, deadline, who) {
  return el("div", { class: "timer", "data-timer": name, "data-deadline": deadline },
    el("span", { class: "timer-name" }, name.toUpperCase() + (who ? ` — ${who}` : "")),
    el("span", { class: "timer-left mono" }, ""), el("progress", { max: 1, value: 0 }));
}

function tickCountdowns(root) {
  for (const node of (root || document).querySelectorAll("[data-deadline]")) {
    const deadline = Number(node.dataset.deadline);
    const left = clock.left(deadline);
    if (!windowLength.has(deadline)) windowLength.set(deadline, Math.max(left, 1000));
    const full = windowLength.get(deadline);
    const text = node.querySelector(".timer-left") || node;
    text.textContent = mmss(left);
    const bar = node.querySelector("progress");
    if (bar) { bar.max = full; bar.value = Math.min(left, full); }
    node.classList.toggle("urgent", left < 5000);
    node.toggleAttribute("data-expired", left === 0);
  }
  if (windowLength.size > 200) windowLength.delete(windowLength.keys().next().value);
}

function timeOfDay(at) {
  if (!Number.isInteger(at)) return "";
  return new Date(at).toTimeString().slice(0, 8);
}

/* -- cards ------------------------------------------------------------------------------------ */

const SUITS = { S: ["♠", "black", "spades"], H: ["♥", "red", "hearts"], D: ["♦", "red", "diamonds"],
  C: ["♣", "black", "clubs"] };
const RANKS = { T: "10", J: "J", Q: "Q", K: "K", A: "A" };

/** A card tile: its code big (a standard card as rank and suit symbol, with the suit's letter
 * too, so colour is never the only sign), or a back that shows no code at all. */
function cardTile(position, code) {
  if (!code) {
    return el("div", { class: "card back", "data-position": position, title: `${position}: face down` },
      el("span", { class: "pos" }, position), el("span", { class: "face" }, "BACK"));
  }
  const std = /^([2-9TJQKA])([SHDC])$/.exec(code);
  if (std) {
    const [sym, colour, name] = SUITS[std[2]];
    return el("div", { class: `card up ${colour}`, "data-position": position, "data-code": code,
      title: `${position}: ${code} (${name})` },
    el("span", { class: "pos" }, position), el("span", { class: std[1] === "T" ? "face wide" : "face" }, (RANKS[std[1]] || std[1]) + sym),
    el("span", { class: "code" }, code));
  }
  return el("div", { class: "card up hwatu", "data-position": position, "data-code": code, title: `${position}: ${code}` },
    el("span", { class: "pos" }, position), el("span", { class: "face" }, code));
}

/** The hand a position belongs to, by the games' position names: Teen Patti A1/B1 (hands A, B);
 * Sevenluck P3.2 and D.1 (seat 3, dealer); stud P3.7, BURN1, COMM; Seotda S2.1; Matgo F.3/O.3
 * (hands), L4 (layout), S5 (stock turned over); R1. before a rematch's or a redeal's positions. */
function handOf(position) {
  const r = /^R(\d+)\.(.+)$/.exec(position);
  if (r) return `Re-deal ${r[1]} · ${handOf(r[2])}`;
  let m = /^[PS](\d+)\./.exec(position);
  if (m) return `Seat ${m[1]}`;
  if (/^D\.?\d/.test(position)) return "Dealer";
  if (/^BURN/i.test(position)) return "Burn";
  if (position === "COMM") return "Community";
  if (/^[FO]\.\d+$/.test(position)) return `Hand ${position[0]}`;
  if (/^L\d+$/.test(position)) return "Layout";
  if (/^S\d+$/.test(position)) return "Stock";
  m = /^([A-Z])\d+$/.exec(position);
  if (m) return `Hand ${m[1]}`;
  m = /^([A-Za-z]+)/.exec(position);
  return m ? m[1] : "Cards";
}

function cardRows(dealt, cards) {
  const groups = new Map();
  for (const pos of dealt) {
    const g = handOf(pos);
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(cardTile(pos, cards[pos]));
  }
  const rows = [];
  for (const [name, tiles] of groups) rows.push(el("div", { class: "hand", "data-hand": name }, el("span", { class: "hand-name" }, name), ...tiles));
  return rows;
}

/* -- messages --------------------------------------------------------------------------------- */

/** Parse a payload into an object, or throw with a short reason. Empty: a retained message cleared. */
function parsePayload(topic, bytes) {
  if (bytes.length > MAX_PAYLOAD) throw new Error(`${bytes.length} bytes, over the ${MAX_PAYLOAD} this screen accepts`);
  if (bytes.length === 0) return null;
  let obj;
  try {
    obj = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (e) {
    throw new Error(`not UTF-8 JSON (${String(e.message || e).slice(0, 80)})`);
  }
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) throw new Error("not a JSON object");
  return obj;
}

const SCHEMAS = { state: "studio.v1.table_state", events: "studio.v1.event", history: "studio.v1.table_history" };

/* Small type checks: a field a page reads is of its type, or absent/null where the protocol allows it
 * (fields added to the protocol later are read as absent when missing). */
const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const isStr = (v) => typeof v === "string";
const optStr = (v) => v === undefined || v === null || isStr(v);
const optInt = (v) => v === undefined || v === null || Number.isInteger(v);
const strMap = (v) => isObj(v) && Object.entries(v).every(([, x]) => isStr(x));
const strList = (v) => Array.isArray(v) && v.every(isStr);

function must(ok, what) {
  if (!ok) throw new Error(what);
}

/** Checks the fields a screen relies on; throws with what is wrong. */
function checkMessage(kind, msg) {
  if (kind === "status") {
    must(typeof msg.online === "boolean", "status without a boolean 'online'");
    must(optStr(msg.session), "status with a 'session' that is not a string");
    return;
  }
  const want = SCHEMAS[kind];
  if (!want) throw new Error("a topic this page does not read");
  must(msg.schema_id === want, `schema_id ${JSON.stringify(msg.schema_id).slice(0, 40)}, expected ${want}`);
  must(isStr(msg.table_id), "no table_id");
  must(optInt(msg.at), "'at' is not an integer");
  if (kind !== "events") {
    must(optStr(msg.node_id) && optStr(msg.session) && optInt(msg.version), "node_id, session or version of the wrong type");
    must(msg.stale === undefined || typeof msg.stale === "boolean", "'stale' is not a boolean");
  }
  if (kind === "events") {
    checkEvent(msg, "");
  } else if (kind === "state") {
    must(strMap(msg.cards), "a state needs 'cards' (position → code)");
    must(msg.dealt === undefined || msg.dealt === null || strList(msg.dealt), "a state's 'dealt' is not a list of positions");
    must(msg.links_down === undefined || msg.links_down === null || isObj(msg.links_down), "a state's 'links_down' is not an object");
    must(msg.turn === undefined || msg.turn === null || (isObj(msg.turn) && optInt(msg.turn.closes_at)), "a state's 'turn' is malformed");
    must(["round_id", "game", "phase", "mode", "dealer", "winner", "outcome", "paused_reason"].every((k) => optStr(msg[k])),
      "a state field of the wrong type");
    must(["betting_closes_at", "decision_closes_at", "confirm_closes_at", "phase_since", "unsettled"].every((k) => optInt(msg[k])),
      "a state deadline or count is not an integer");
    // protocol 2: the current prompt, and the batch's events and prompts (each checked as its own message was)
    must(msg.prompt === undefined || msg.prompt === null || isObj(msg.prompt), "a state's 'prompt' is not an object");
    if (isObj(msg.prompt)) checkPrompt(msg.prompt, "the state's prompt: ");
    must(msg.events === undefined || msg.events === null || Array.isArray(msg.events), "a state's 'events' is not a list");
    must(msg.prompts === undefined || msg.prompts === null || Array.isArray(msg.prompts), "a state's 'prompts' is not a list");
    (msg.events || []).forEach((ev, i) => { must(isObj(ev), `the state's event ${i} is not an object`); checkEvent(ev, `the state's event ${i}: `); });
    (msg.prompts || []).forEach((p, i) => { must(isObj(p), `the state's prompt ${i} is not an object`); checkPrompt(p, `the state's prompt ${i}: `); });
  } else if (kind === "history") {
    must(Array.isArray(msg.rounds) && Array.isArray(msg.dealers), "a history needs 'rounds' and 'dealers'");
    must(msg.rounds.every((r) => isObj(r) && isStr(r.round_id) && optStr(r.outcome) && optStr(r.winner) &&
      (r.dealers === undefined || Array.isArray(r.dealers))), "a history round is malformed");
    must(msg.dealers.every((d) => isObj(d) && optStr(d.dealer) && ["rounds", "cards", "rescans", "mistakes"].every((k) => optInt(d[k]))),
      "a history dealer entry is malformed");
  }
}

function checkPrompt(p, where) {
  must(isStr(p.kind) && isStr(p.message), `${where}a prompt needs 'kind' and 'message'`);
  must(optStr(p.position) && optStr(p.reason) && optStr(p.announce) && optStr(p.round_id), `${where}a prompt field of the wrong type`);
  must(optInt(p.step) && optInt(p.of) && optInt(p.count) && optInt(p.at), `${where}a prompt's step, of, count or at is not an integer`);
}

function checkEvent(ev, where) {
  must(isStr(ev.event) && isObj(ev.data), `${where}an event needs 'event' and 'data'`);
  must(optStr(ev.round_id) && optInt(ev.at), `${where}an event's round_id or at is of the wrong type`);
}

/** A message as a screen takes it: {where, msg}, or null (not ours, a retained message cleared, or
 * bad: then the error is listed on the page, never thrown). */
function readMessage(topic, payload, errors) {
  const where = splitTopic(topic);
  if (!where) return null;
  try {
    const msg = parsePayload(topic, payload);
    if (msg === null) return null;
    checkMessage(where.kind, msg);
    return { where, msg };
  } catch (e) {
    errors.add(`bad message on ${topic}: ${e.message}`);
    return null;
  }
}

/** §4.8: act on a retained message only while it is not stale and its node is online with the same session. */
function isCurrent(msg, status) {
  return !!msg && !!status && msg.stale === false && status.online === true &&
    typeof msg.session === "string" && msg.session === status.session;
}

/** Is retained message `a` newer than `b` (same topic)? `version` orders messages, also across a
 * backend's sessions (§4.8); a current one beats one that is not (a wall clock that went back). */
function newerRetained(a, b, statuses) {
  if (!b) return true;
  const cur = (m) => isCurrent(m, statuses[m.node_id]);
  if (cur(a) !== cur(b)) return cur(a);
  if (Number.isFinite(a.version) && Number.isFinite(b.version)) return a.version >= b.version;
  return (a.at || 0) >= (b.at || 0);
}

/**
 * Protocol 2: what each table's states bring that this page has not had yet. A state carries the
 * round events and prompts of the batch it follows; the retained copy a (re)subscription gets
 * repeats the last batch's. `read(state)` returns them once per table and `version` (which
 * increases with every state of a table, also across a backend's restarts and takeovers): the
 * first state seen of a table brings its batch (and, when it carries no prompt of its own, its
 * current prompt), a redelivered or older one brings nothing.
 */
class StateNews {
  constructor() { this.versions = new Map(); } // table -> the highest version read
  read(state) {
    const tid = state.table_id;
    const seen = this.versions.get(tid);
    if (!Number.isInteger(state.version) || (seen !== undefined && state.version <= seen)) return { events: [], prompts: [] };
    this.versions.set(tid, state.version);
    const events = Array.isArray(state.events) ? state.events : [];
    let prompts = Array.isArray(state.prompts) ? state.prompts : [];
    if (!prompts.length && seen === undefined && isObj(state.prompt)) prompts = [state.prompt];
    return { events, prompts };
  }
}

function samePrompt(a, b) {
  return !!a && !!b && a.at === b.at && a.kind === b.kind && a.position === b.position && a.count === b.count &&
    a.reason === b.reason && a.round_id === b.round_id;
}

/** Walks a table's prompts in order and hands on every ALERT that a later prompt replaced: the
 * screens show one prompt big, and an ALERT must never vanish unseen (two prompts of one batch
 * come in one state: an ALERT and the next prompt; a forged frame's ALERT is replaced by the next
 * card's prompt). `walk(prompts)` returns the ALERTs the given prompts replaced. */
class AlertWatch {
  constructor() { this.last = null; }
  walk(prompts) {
    const replaced = [];
    for (const p of prompts) {
      if (this.last && this.last.kind === "ALERT" && !samePrompt(this.last, p)) replaced.push(this.last);
      this.last = p;
    }
    return replaced;
  }
}

/* -- events as one line each ------------------------------------------------------------------ */

const REASON_TEXT = {
  noread: "the scanner could not read the card", misread: "the scanner misread the card",
  corrupt_frame: "the reader's message arrived damaged", frame_lost: "a reader message was lost (sequence gap)",
  device_fault: "the reader reports a fault", foreign_card: "card not from this deck",
  duplicate_card: "card already dealt this round", forged_frame: "the reader's message failed authentication",
  security: "a command was refused for security", journal_unavailable: "the backend cannot record: stop dealing",
  not_expected: "no card is expected now",
};

const WARN_EVENTS = ["scan_rejected", "rejected", "round_voided", "round_cancelled", "link_down", "table_paused",
  "table_closing", "table_closed", "card_burned"];

function eventText(ev) {
  const d = ev.data || {};
  const who = d.supervisor ? ` by ${d.supervisor}${d.reason ? `: ${d.reason}` : ""}` : "";
  switch (ev.event) {
    case "card_registered": return `${d.position} ${d.card || "face down"}`;
    case "round_opened": return "betting open" + (d.opened_by ? ` (opened by ${d.opened_by})` : "");
    case "bet_accepted": return `bet ${d.player_id || ""} ${d.bet_type || ""} ${d.stake || ""}${d.seat ? ` seat ${d.seat}` : ""}`;
    case "bet_rejected": return `bet ${d.bet_id || ""} refused: ${d.reason || ""}`;
    case "betting_closed": return `betting closed by ${d.by}: ${d.bets} bet(s)`;
    case "dealer_confirmed": return `${d.step} confirmed${d.by === "timer" ? " (window closed)" : ""}`;
    case "confirm_window": return `exposure window until ${timeOfDay(d.closes_at)}${d.resumed ? " (again)" : ""}`;
    case "card_exposed": return `${d.position} exposed: ${d.card || ""}`;
    case "player_acted": return `${d.player_id || ""} ${d.action || ""}${d.total ? ` to ${d.total}` : ""}`;
    case "turn": return `turn ${d.turn}: ${d.player_id || ""}${d.street ? ` (${d.street})` : ""}`;
    case "decision_made": return `${d.player_id || ""} ${d.action || ""}`;
    case "decisions_open": return `players decide until ${timeOfDay(d.closes_at)}`;
    case "cards_revealed": return "revealed " + Object.entries(d.cards || {}).map(([p, c]) => `${p} ${c}`).join(" ");
    case "round_settled": return "settled";
    case "scan_rejected": return `RESCAN ${d.position}: ${REASON_TEXT[d.reason] || d.reason}${d.detail ? ` (${d.detail})` : ""}`;
    case "rejected": return `REFUSED ${d.type}: ${d.reason}`;
    case "round_result": return `RESULT: winner ${d.winner}`;
    case "round_voided": case "round_cancelled": return `${ev.event.slice(6).toUpperCase()}: ${d.reason}`;
    case "dealer_logged_on": return `dealer ${d.dealer_id} logged on${d.previous ? ` (after ${d.previous})` : ""}`;
    case "command_accepted": return `${d.type} accepted`;
    case "command_repeated": return `${d.type} repeated: answered ${d.answer || "accepted"}`;
    case "link_down": return `LINK DOWN ${d.link}${d.reason ? `: ${d.reason}` : ""}`;
    case "link_up": return `link up ${d.link}`;
    case "table_paused": return `PAUSED${who}`;
    case "table_resumed": return `resumed${who}`;
    case "table_closing": return `CLOSING after this round${who}`;
    case "table_closed": return `CLOSED${who}`;
    case "table_reopened": return `reopened${who}`;
    default: {
      const s = JSON.stringify(d);
      return s === "{}" ? "" : s.slice(0, 160);
    }
  }
}

/** One line of an event log (newest first in the page's list). */
function eventLine(ev) {
  const d = ev.data || {};
  const warn = WARN_EVENTS.includes(ev.event);
  return el("li", { class: `ev${warn ? " warn" : ""}`, "data-event": ev.event, "data-reason": typeof d.reason === "string" ? d.reason.slice(0, 100) : null,
    "data-round-id": ev.round_id || null },
  el("span", { class: "ev-time mono" }, timeOfDay(ev.at)), el("span", { class: "ev-name" }, ev.event), el("span", { class: "ev-text" }, eventText(ev)));
}

/* -- answers to the page's own commands ------------------------------------------------------- */

const ANSWER_MARK = { ACCEPTED: "✓", REJECTED: "✗", SENT: "…", "NO ANSWER YET": "?", "NOT SENT": "✗" };

/** SENT, NO ANSWER YET (5 s without one: the command may be sent again, same id), ACCEPTED, REJECTED, NOT SENT. */
function answerStatus(a) {
  return a.status === "SENT" && Date.now() - a.sentAt > 5000 ? "NO ANSWER YET" : a.status;
}

/** The answers to show, newest first: every refusal until it is dismissed, and the last `n` others. */
function answersToShow(list, n) {
  const bad = (a) => (a.status === "REJECTED" || a.status === "NOT SENT") && !a.dismissed;
  const shown = list.filter((a, i) => bad(a) || (i >= list.length - n && !a.dismissed));
  return shown.reverse();
}

function answerRow(a, { onResend, onDismiss }) {
  const status = answerStatus(a);
  const row = el("div", { class: "answer", "data-status": status.replace(/ /g, "_"), "data-command-id": a.command_id, "data-type": a.type },
    el("span", { class: "answer-mark" }, `${ANSWER_MARK[status] || ""} ${status}`), el("span", { class: "answer-what" }, a.label),
    a.reason ? el("span", { class: "answer-reason" }, a.reason) : null);
  if (status === "NO ANSWER YET" && onResend) row.append(el("button", { class: "small", type: "button", onclick: () => onResend(a) }, "SEND AGAIN"));
  if ((status === "REJECTED" || status === "NOT SENT") && onDismiss) {
    row.append(el("button", { class: "small", type: "button", onclick: () => { a.dismissed = true; onDismiss(a); } }, "DISMISS"));
  }
  return row;
}

/* -- errors ------------------------------------------------------------------------------------- */

/** A bounded list of problems, shown on the page until dismissed; nothing is ever thrown away silently.
 * `opts`: the field of `state` that lists them (errors), their noun (PROBLEM) and each one's mark (⚠ ERROR). */
class ErrorList {
  constructor(container, state, opts) {
    this.container = container;
    this.state = state;
    this.key = (opts && opts.key) || "errors";
    this.noun = (opts && opts.noun) || "PROBLEM";
    this.mark = (opts && opts.mark) || "⚠ ERROR";
    this.items = new Map(); // text -> count
  }
  add(text) {
    text = String(text).slice(0, 300);
    this.items.set(text, (this.items.get(text) || 0) + 1);
    while (this.items.size > 20) this.items.delete(this.items.keys().next().value);
    this.state[this.key] = [...this.items.keys()];
    this.render();
  }
  dismiss(text) {
    if (text === undefined) this.items.clear();
    else this.items.delete(text);
    this.state[this.key] = [...this.items.keys()];
    this.render();
  }
  /** Newest first, in a bounded, scrolling box under a count that stays in view: the errors are
   * never hidden, and they never push the dealer's prompt off the screen either. */
  render() {
    const n = this.items.size;
    this.container.hidden = n === 0;
    this.container.dataset.count = n;
    const head = el("div", { class: "errors-head" }, el("span", { class: "error-mark" }, `⚠ ${n} ${this.noun}${n === 1 ? "" : "S"}`),
      n > 1 ? el("button", { class: "small", type: "button", onclick: () => this.dismiss() }, "DISMISS ALL") : null);
    const rows = [...this.items].reverse().map(([text, count]) => el("div", { class: "error-item", role: "alert" },
      el("span", { class: "error-mark" }, this.mark), el("span", { class: "error-text" }, text + (count > 1 ? `  (×${count})` : "")),
      el("button", { class: "small", type: "button", onclick: () => this.dismiss(text) }, "DISMISS")));
    this.container.replaceChildren(head, el("div", { class: "errors-list" }, ...rows));
  }
}

/* -- the broker connection ------------------------------------------------------------------------ */

/** Credentials from the address's fragment (#user=..&password=..), never sent to the server;
 * the password leaves the address bar at once. */
function credentialsFromFragment() {
  const p = new URLSearchParams(location.hash.slice(1));
  const user = p.get("user");
  const password = p.get("password");
  if (user || password) history.replaceState(null, "", location.pathname + location.search);
  return { user, password };
}

/**
 * One MQTT connection for a screen. `subscriptions()` is asked again on every (re)connect
 * (a clean session: the broker remembers nothing); the retained topics then bring the
 * screen back to the present. Banner states: CONNECTING, CONNECTED, BROKER DOWN, LOGIN REFUSED.
 */
class Link {
  constructor({ banner, state, errors, onMessage, subscriptions, role, onChange, onConnect }) {
    this.onChange = onChange || (() => {});
    this.onConnect = onConnect || (() => {});
    this.banner = banner;
    this.state = state;
    this.errors = errors;
    this.onMessage = onMessage;
    this.subscriptions = subscriptions;
    this.role = role;
    this.client = null;
    this.user = null;
  }

  connect(user, password) {
    if (this.client) this.client.end(true);
    this.user = user;
    this.show("CONNECTING", `connecting to the broker as ${user} …`);
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/mqtt`;
    const client = mqtt.connect(url, {
      username: user, password, protocolVersion: 4, clean: true, reconnectPeriod: 1000, connectTimeout: 5000,
      clientId: randomId(`${this.role}-`), resubscribe: false, keepalive: 10,
      timerVariant: "native", // its default runs keepalive timers in a blob: worker, which the CSP forbids
    });
    this.client = client;
    client.on("connect", () => {
      if (this.client !== client) return;
      this.onConnect(); // before the retained messages come again
      this.state.connected = true;
      this.show("CONNECTED", `connected as ${user}`);
      const subs = this.subscriptions();
      if (subs.length) {
        client.subscribe(subs, { qos: 1 }, (err, granted) => {
          if (err) this.errors.add(`subscribe failed: ${err.message || err}`);
          const refused = (granted || []).filter((g) => g.qos === 128).map((g) => g.topic);
          if (refused.length) this.errors.add(`the broker refused ${refused.length} subscription(s) for ${user}: ${refused.slice(0, 3).join(", ")}`);
        });
      }
    });
    client.on("message", (topic, payload, packet) => {
      try {
        this.onMessage(topic, payload, packet);
      } catch (e) {
        this.errors.add(`message on ${topic} not shown: ${e.message || e}`);
      }
    });
    client.on("error", (err) => {
      // a CONNACK refusal (MQTT 3.1.1 return codes 1, 2, 4, 5) is final: retrying would only repeat it
      const refused = err && ([1, 2, 4, 5].includes(err.code) || /Not authorized|Bad username|Identifier rejected/i.test(err.message || ""));
      if (refused) {
        this.state.connected = false;
        this.show("LOGIN REFUSED", `LOGIN REFUSED for ${user}: ${err.message || err} — do not deal`);
        client.end(true);
        if (this.onRefused) this.onRefused();
      } else {
        this.errors.add(`connection error: ${err && err.message ? err.message : err}`);
      }
    });
    const down = () => {
      if (this.client !== client || this.state.banner === "LOGIN REFUSED") return; // an old login's connection, or a final refusal
      this.state.connected = false;
      this.show("BROKER DOWN", "BROKER DOWN — do not deal: reconnecting …");
    };
    client.on("close", down);
    client.on("offline", down);
  }

  publish(topic, obj) {
    return new Promise((resolve, reject) => {
      if (!this.client || !this.state.connected) {
        reject(new Error("not connected to the broker"));
        return;
      }
      this.client.publish(topic, JSON.stringify(obj), { qos: 1, retain: false }, (err) => (err ? reject(err) : resolve()));
    });
  }

  show(kind, text) {
    this.state.banner = kind;
    this.banner.dataset.state = kind.replace(" ", "_");
    this.banner.textContent = text;
    this.onChange(); // the screen redraws what the connection decides (a blocker over the prompt)
  }
}

/** The login form: prefilled from the fragment (then it connects at once). */
function setupLogin(form, link, defaultUser) {
  const creds = credentialsFromFragment();
  const user = form.querySelector("[name=user]");
  const pass = form.querySelector("[name=password]");
  user.value = creds.user || defaultUser || "";
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (!user.value) return;
    link.connect(user.value, pass.value);
    pass.value = "";
    form.hidden = true;
  });
  link.onRefused = () => { form.hidden = false; pass.focus(); }; // type it again
  if (creds.user && creds.password) {
    form.hidden = true;
    link.connect(creds.user, creds.password);
  }
}

/* -- supervisor signing (docs/mqtt-topics.md §10.2, the JavaScript of §10.3) ------------------------ */

/** The canonical form: keys sorted, no whitespace, each value as JSON.stringify writes it (the
 * command is a flat object of strings and integers, for which this is RFC 8785). */
function canonical(obj) {
  return "{" + Object.keys(obj).filter((k) => k !== "signature").sort()
    .map((k) => JSON.stringify(k) + ":" + JSON.stringify(obj[k])).join(",") + "}";
}

/** A supervisor's key file (hex text, 16 bytes at least) as a CryptoKey that can sign and never be read back. */
async function importKeyHex(text) {
  const hex = String(text).trim();
  if (hex.length > 1024) throw new Error("this is not a key file: it is far too long (a key is 64 hex digits)");
  if (!/^[0-9a-fA-F]*$/.test(hex)) throw new Error("this is not a key file: a key file holds only hex digits 0-9 a-f (dealer supervisor keygen makes one)");
  if (hex.length % 2) throw new Error(`this is not a key file: an odd number of hex digits (${hex.length})`);
  if (hex.length < 32) throw new Error(`this key is too short: ${hex.length / 2} bytes, at least 16 are needed (a key file holds 32)`);
  if (!window.crypto || !crypto.subtle) throw new Error("this page cannot sign: open it over https (or on localhost), WebCrypto needs a secure page");
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.substr(i * 2, 2), 16);
  try {
    return await crypto.subtle.importKey("raw", bytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  } finally {
    bytes.fill(0); // only the non-extractable CryptoKey stays
  }
}

/** The command with its signature: lowercase hex HMAC-SHA256 of the canonical UTF-8 bytes. */
async function signCommand(obj, key) {
  const body = Object.fromEntries(Object.entries(obj).filter(([k]) => k !== "signature"));
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(canonical(body)));
  const signature = Array.from(new Uint8Array(mac), (b) => b.toString(16).padStart(2, "0")).join("");
  return { ...body, signature };
}

window.dealerSigning = { canonical, signCommand, importKeyHex };
