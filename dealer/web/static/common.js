/* What both screens share: the broker login, the connection banner, the currentness rule for
 * retained messages (docs/mqtt-topics.md §4.8), the backend's clock, card tiles, a bounded error
 * list, and the supervisor's signing (§10.2). Plain browser JS, no build step: the server's CSP
 * allows only scripts from this origin, so nothing here is inline. */
"use strict";

const PREFIX = "studio/v1";
const MAX_PAYLOAD = 128 * 1024; // the backend publishes nothing larger ([service] max_message_bytes): a bigger one is an error, not data
const ID_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

const topicOf = {
  current: (t) => `${PREFIX}/tables/${t}/prompts/current`,
  prompts: (t) => `${PREFIX}/tables/${t}/prompts`,
  state: (t) => `${PREFIX}/tables/${t}/state`,
  events: (t) => `${PREFIX}/tables/${t}/events`,
  history: (t) => `${PREFIX}/tables/${t}/history`,
  station: (t) => `${PREFIX}/tables/${t}/station`,
  supervisor: (t) => `${PREFIX}/tables/${t}/supervisor`,
  status: (n) => `${PREFIX}/backends/${n}/status`,
};

/** The table and the kind ("state", "events", "prompts/current" ...) of a table topic, or null. */
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
 * smallest (arrival − at) seen lately, i.e. the skew plus the shortest delivery. */
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

/** Positions grouped by their hand: "A1" → A, "P3.2" → seat 3, "D.1"/"D1" → dealer. */
function handOf(position) {
  let m = /^[PS](\d+)\./.exec(position); // a seat's cards (P3.2 in poker games, S3.1 in Seotda)
  if (m) return `Seat ${m[1]}`;
  if (/^D\.?\d/.test(position)) return "Dealer";
  if (/^BURN/i.test(position)) return "Burn";
  m = /^([A-Z]+)\d*$/.exec(position);
  if (m) return m[1].length === 1 ? `Hand ${m[1]}` : m[1];
  m = /^([A-Z]+)/.exec(position);
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

const SCHEMAS = {
  "prompts/current": "studio.v1.current_prompt", prompts: "studio.v1.prompt", state: "studio.v1.table_state",
  events: "studio.v1.event", history: "studio.v1.table_history",
};

/** Checks the fields a screen relies on; throws with what is wrong. */
function checkMessage(kind, msg) {
  if (kind === "status") {
    if (typeof msg.online !== "boolean") throw new Error("status without a boolean 'online'");
    return;
  }
  const want = SCHEMAS[kind];
  if (want && msg.schema_id !== undefined && msg.schema_id !== want) throw new Error(`schema_id ${String(msg.schema_id).slice(0, 40)}, expected ${want}`);
  if (want && typeof msg.table_id !== "string") throw new Error("no table_id");
  if ((kind === "prompts" || kind === "prompts/current") && (typeof msg.kind !== "string" || typeof msg.message !== "string"))
    throw new Error("a prompt needs 'kind' and 'message'");
  if (kind === "events" && (typeof msg.event !== "string" || typeof msg.data !== "object" || msg.data === null))
    throw new Error("an event needs 'event' and 'data'");
  if (kind === "state" && (typeof msg.cards !== "object" || msg.cards === null)) throw new Error("a state needs 'cards'");
  if (kind === "history" && (!Array.isArray(msg.rounds) || !Array.isArray(msg.dealers))) throw new Error("a history needs 'rounds' and 'dealers'");
}

/** §4.8: act on a retained message only while it is not stale and its node is online with the same session. */
function isCurrent(msg, status) {
  return !!msg && !!status && msg.stale === false && status.online === true &&
    typeof msg.session === "string" && msg.session === status.session;
}

/* -- errors ------------------------------------------------------------------------------------- */

/** A bounded list of problems, shown on the page until dismissed; nothing is ever thrown away silently. */
class ErrorList {
  constructor(container, state) {
    this.container = container;
    this.state = state;
    this.items = new Map(); // text -> count
  }
  add(text) {
    text = String(text).slice(0, 300);
    this.items.set(text, (this.items.get(text) || 0) + 1);
    while (this.items.size > 20) this.items.delete(this.items.keys().next().value);
    this.state.errors = [...this.items.keys()];
    this.render();
  }
  render() {
    this.container.replaceChildren();
    this.container.hidden = this.items.size === 0;
    for (const [text, n] of this.items) {
      this.container.append(el("div", { class: "error-item", role: "alert" },
        el("span", { class: "error-mark" }, "⚠ ERROR"), el("span", { class: "error-text" }, text + (n > 1 ? `  (×${n})` : "")),
        el("button", { class: "small", onclick: () => { this.items.delete(text); this.state.errors = [...this.items.keys()]; this.render(); } }, "DISMISS")));
    }
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
  constructor({ banner, state, errors, onMessage, subscriptions, role, onChange }) {
    this.onChange = onChange || (() => {});
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
      const refused = err && (err.code === 4 || err.code === 5 || /Not authorized|Bad username/i.test(err.message || ""));
      if (refused) {
        this.state.connected = false;
        this.show("LOGIN REFUSED", `the broker refused the login of ${user}: ${err.message || err}`);
        client.end(true);
      } else {
        this.errors.add(`connection error: ${err && err.message ? err.message : err}`);
      }
    });
    const down = () => {
      if (this.state.banner === "LOGIN REFUSED") return;
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
  if (!/^([0-9a-fA-F]{2}){16,}$/.test(hex)) throw new Error("the key file must hold the key as hex text (32 bytes or more; dealer supervisor keygen makes one)");
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.substr(i * 2, 2), 16);
  return crypto.subtle.importKey("raw", bytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

/** The command with its signature: lowercase hex HMAC-SHA256 of the canonical UTF-8 bytes. */
async function signCommand(obj, key) {
  const body = Object.fromEntries(Object.entries(obj).filter(([k]) => k !== "signature"));
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(canonical(body)));
  const signature = Array.from(new Uint8Array(mac), (b) => b.toString(16).padStart(2, "0")).join("");
  return { ...body, signature };
}

window.dealerSigning = { canonical, signCommand, importKeyHex };
