"""``dealer bench fuzz`` targets for the peer games' commands, on a live service: Seven-Card
Stud (``stud_commands``), Seotda (``seotda_commands``) and Matgo (``matgo_commands``).

Each target runs a real :class:`~dealer.edge.service.Service` (its commit loop and group
commit, a SQLite journal in a temporary folder, the in-process bus, the outbox relay, the Matgo
house AI) with one table of its game, and plays rounds on it. A virtual dealer deals every card
through the table's MQTT scanner topic and confirms the steps the station is asked for; the
fuzzer's inputs are the commands of the players and of the dealer station, sent on their topics
and generated from what the table shows at that moment (who is to act, the turn number, the
``your_turn`` options):

* valid ones (the simulated players' strategies: ``simulators/*_players.py``), so that rounds
  go on through every street, button, rematch choice, re-entry, Go and Stop;
* well-formed but wrong ones: out of turn, an action or button the turn does not offer or
  another game's, an amount outside the range, not of the money unit, negative or on a button,
  a Matgo card that is not in hand, a reservation at the wrong moment (on one's own turn, after a
  fold, during a choice, in a game without reservations), a choice on a betting turn, a card
  exposed that may not be, a confirmation of another step, a seat taken, a second buy-in;
* stale ones: an earlier turn or round, a command delivered again (QoS 1), an id reused for
  another command;
* malformed ones (the command mutated as :func:`tools.mutate_tree` does) and the turn and
  confirmation timers' own events, for the current turn and stale.

The contract, for every input (a broken one is a finding):

* **no crash, no traceback**: the command handler, the core (a guard on the table), the house
  AI, the commit loop and every task of the event loop raise nothing, and nothing logs an
  exception; the service never stops answering;
* **one clear answer**: a refused command is answered once (one ``rejected`` event, with a
  reason), an accepted player command once on the player's topic (a repeat as a repeat); an
  answer never says "a hidden card" (whether a card the sender named is hidden is hidden too);
* **refusals change nothing**: every event the commit loop applies is compared with the table
  before it; one that is refused, or not journaled, left it exactly as it was;
* **no action applied twice**: a command sent again is answered, never applied again; an
  accepted action (or timeout) is exactly one ``player_acted`` of its player, and no turn of a
  round is acted on twice;
* **chips conserved**: every completed result returns what the players brought, less the rake
  (stud), exactly (Seotda), or the cover plus or minus the payment, never below zero (Matgo);
  one result per round;
* every few hundred inputs the service is stopped and started again on its journal: the hash
  chain verifies, the journal holds at most one action per turn, and the table rebuilt from the
  journal is the table that was live. Every few restarts a new journal begins, under the next of
  the game's sets of house options (Seotda: ``PROMPT`` 9·4 choices and ``HALF_POT`` re-entries).

The games' players and dealing are in :mod:`tools.fuzz_game_players`. The house AI thinks in a
thread (not the worker process of production: a pool per restart would cost more than the
inputs) with a fixed search size (``MatgoRequest.playouts``), and rounds get their secret draw
from the seed, so a run's counts are a function of its seed (timings aside).
"""

from __future__ import annotations

import asyncio
import copyreg
import dataclasses
import gc
import hashlib
import io
import json
import logging
import pickle
import random
import shutil
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from tools.fuzz_inputs import MAX_INPUT, Violation, dump_json, encode_text, mutate_tree
from tools.fuzz_target import Target, need

TID = "G1"
READER = "R1"
#: The topic of an input that is a timer's event (submitted as the service's timers do).
TIMER = "timer"
#: Inputs on one service before it is stopped and started again on its journal (drawn in this range).
SESSION_INPUTS = (150, 500)
#: Services started on one journal before the next journal (and set of house options) begins.
SESSIONS_PER_JOURNAL = 3
#: Wall-clock seconds the service may take to go quiet after one input (a hang is a finding).
SETTLE_S = 30.0
#: Error log lines that are answers, not faults: a security refusal and a station alert.
BENIGN_ERRORS = frozenset({"security event", "supervisor alert", "scanner frame failed authentication"})
#: The Matgo AI's search size here: its move is a function of the request (and quick).
HOUSE_PLAYOUTS = 6
_EPOCH_MS = 1_767_225_600_000
#: What a refusal says instead of a hidden card (dealer.core.visibility.HIDDEN_TEXT): an answer to
#: a command never says it, since whether a card the sender named is hidden is itself hidden.
HIDDEN_TEXT = "a hidden card"


@dataclasses.dataclass
class Applied:
    """One event the commit loop applied, as the harness saw it."""

    item: Any
    step: Any
    before: bytes
    after: bytes
    journaled: bool
    round_turn: tuple[str, int] | None

    @property
    def changed(self) -> str:
        """The fields the event changed, "" when none (compared only when asked: it costs)."""
        return ", ".join(_differences(self.before, self.after)) if self.after != self.before else ""


def _position(pos: Any) -> tuple[Any, ...]:
    """A deal position (immutable, one per name and deck) pickles as its name: 4 times faster."""
    return str, (f"{pos.name}@{pos.deck}",)


def _snapshot(table: Any) -> bytes:
    """The table's state as bytes: equal bytes, equal state (a counter of handled events aside)."""
    from dealer.games.base import Position

    cur = table.current
    rnd = None if cur is None else {k: v for k, v in vars(cur).items() if k not in ("revision", "rules")}
    tbl = {k: v for k, v in vars(table).items() if k not in ("current", "rules", "handle", "undelivered", "shift")}
    tbl["undelivered"] = sorted((rid, r.phase, r.delivered) for rid, r in table.undelivered.items())
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=5)
    pickler.dispatch_table = {**copyreg.dispatch_table, Position: _position}
    pickler.dump((tbl, rnd))
    return out.getvalue()


def _same(a: Any, b: Any, seen: set[tuple[int, int]] | None = None) -> bool:
    """Structural equality: objects compare by their fields (a rebuilt table shares no object
    with the live one, and most of the hand's objects have no ``__eq__``); a cycle (the betting
    limits know their hand) is compared once."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (str, bytes, int, float, bool, Decimal, type(None), set, frozenset)):
        return bool(a == b)
    seen = set() if seen is None else seen
    pair = (id(a), id(b))
    if pair in seen:
        return True
    seen.add(pair)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k], seen) for k, v in a.items())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y, seen) for x, y in zip(a, b))
    fields = _fields(a)
    if fields is None:
        return bool(a == b)
    return _same(fields, _fields(b), seen)


def _where(a: Any, b: Any, path: str = "", depth: int = 0) -> str:
    """The path of the first difference between two structures (for a finding's message)."""
    if _same(a, b) or depth > 8:
        return path
    if type(a) is not type(b) or isinstance(a, (str, bytes, int, float, bool, Decimal, type(None), set, frozenset)):
        return f"{path}: {str(a)[:60]} != {str(b)[:60]}"
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(map(str, a.keys() ^ b.keys()))[:5]}"
        return next(_where(v, b[k], f"{path}.{k}", depth + 1) for k, v in a.items() if not _same(v, b[k]))
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        return next(_where(x, y, f"{path}[{i}]", depth + 1) for i, (x, y) in enumerate(zip(a, b)) if not _same(x, y))
    fa, fb = _fields(a), _fields(b)
    return _where(fa, fb, path, depth + 1) if fa is not None else f"{path}: {a!r:.60} != {b!r:.60}"


def _fields(obj: Any) -> dict[str, Any] | None:
    if hasattr(obj, "__dict__"):
        return dict(vars(obj))
    slots = [n for cls in type(obj).__mro__ for n in getattr(cls, "__slots__", ())]
    return {n: getattr(obj, n, None) for n in slots} if slots else None


def _differences(a: bytes, b: bytes) -> list[str]:
    """Which fields of two snapshots differ, structurally (table fields, ``round.`` fields, the
    hand's ``hand.`` fields); none when only their pickles differ (shared objects, dict order)."""
    (ta, ra), (tb, rb) = pickle.loads(a), pickle.loads(b)
    out = [k for k in sorted(set(ta) | set(tb)) if not _same(ta.get(k), tb.get(k))]
    if (ra is None) != (rb is None):
        return out + ["round"]
    for k in sorted(set(ra or {}) | set(rb or {})):
        va, vb = (ra or {}).get(k), (rb or {}).get(k)
        if k == "hand" and va is not None and vb is not None:
            ha, hb = vars(va), vars(vb)
            out += [_where(ha.get(h), hb.get(h), f"hand.{h}") for h in sorted(set(ha) | set(hb))
                    if not _same(ha.get(h), hb.get(h))]
        elif not _same(va, vb):
            out.append(_where(va, vb, f"round.{k}"))
    return out


def as_money(value: Any) -> Decimal:
    return Decimal(str(value))


class GameCommandsTarget(Target):
    """The live service and its table; the game's subclass says how its players sit and act."""

    game = ""
    players: tuple[str, ...] = ("p1", "p2", "p3", "p4", "p5")
    #: the table's configuration apart from its id, scanner and timers; one per journal in turn
    option_sets: tuple[dict[str, Any], ...] = ({},)
    #: the bet type that brings a player's chips, and valid and wrong stakes for it
    chips_bet = "chips"
    stakes: tuple[str, ...] = ()
    bad_stakes: tuple[str, ...] = ()
    seats: int = 4
    foreign_cards: tuple[str, ...] = ()

    # -- life cycle ---------------------------------------------------------------------------

    def setup(self, seed: int) -> None:
        super().setup(seed)
        self.allowed = ()
        self.seed = seed
        self._tmp = tempfile.TemporaryDirectory(prefix=f"dealer-fuzz-{self.game}-")
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(self._loop_error)
        self.now = _EPOCH_MS
        self.journal_no = 0
        self.sessions_on_journal = 0
        self.svc: Any = None
        self.task: asyncio.Task[None] | None = None
        self.live: bytes | None = None  # the live table's state when its service stopped
        self.seq = 0  # the scanner's frame counter
        self.recent: list[tuple[str, bytes]] = []
        self.recent_ids: list[str] = []
        self.accepted_ids: dict[tuple[str, str, str], str] = {}
        self.acted: dict[str, set[int]] = {}
        self.result_keys: set[str] = set()
        self.last_rounds: list[str] = []
        self.errors: list[str] = []
        self.core_error: BaseException | None = None
        self.refusals: list[Any] = []
        self.applied: list[Applied] = []
        self.verified = 0  # how many of them were checked
        self.events: list[dict[str, Any]] = []
        self.private: list[dict[str, Any]] = []
        self.pause = 0
        self.held = 0  # inputs a confirmation window is left open for the fuzzer
        self.betting_inputs = 0
        self.shoes: dict[tuple[str, int], list[str]] = {}
        self.forced: dict[str, str] = {}
        #: what the rounds reached, for tests: results by outcome, actions by kind, rematches ...
        self.reached: dict[str, int] = {}

    def close(self) -> None:
        try:
            if self.task is not None:
                self.loop.run_until_complete(self._stop())
        except Violation:
            pass  # the run is over; its last journal's check is the one a finding would have shown
        finally:
            self.loop.close()
            self._tmp.cleanup()

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        self.errors.append(f"event loop: {context.get('message')}: {exc!r}"[:300])

    def _capture(self, _logger: Any, method: str, event_dict: dict[str, Any]) -> Any:
        """A structlog processor: an exception logged, or an error that is not an answer, is noted."""
        import structlog

        name = str(event_dict.get("event"))
        if event_dict.get("exc_info") or (method in ("error", "critical") and name not in BENIGN_ERRORS):
            self.errors.append(f"logged {method}: {name} "
                               f"{ {k: v for k, v in event_dict.items() if k not in ('event', 'exc_info')} }"[:300])
        raise structlog.DropEvent

    def _journal_path(self) -> Path:
        return Path(self._tmp.name) / f"journal-{self.journal_no}.sqlite"

    def table_config(self) -> dict[str, Any]:
        options = self.option_sets[(self.journal_no - 1) % len(self.option_sets)]
        return {"id": TID, "game": self.game, "auto_rounds": False, "betting_seconds": 3600.0,
                "action_seconds": 3600.0, "scanner": {"kind": "mqtt", "reader_id": READER, "heartbeat_timeout": 3600.0},
                **options}

    async def _start(self) -> None:
        """A service on the journal (a new one every few starts); the table rebuilt from it must
        be the one the last service left."""
        import structlog

        from dealer.edge import topics
        from dealer.edge.config import load_settings
        from dealer.edge.service import Service
        from drivers.bus import LocalBus

        structlog.configure(processors=[self._capture],
                            wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
        if self.sessions_on_journal >= SESSIONS_PER_JOURNAL or self.journal_no == 0:
            for f in Path(self._tmp.name).iterdir():
                shutil.rmtree(f) if f.is_dir() else f.unlink()
            self.journal_no += 1
            self.sessions_on_journal, self.live = 0, None
            self.acted.clear()
            self.accepted_ids.clear()
        self.sessions_on_journal += 1
        settings = load_settings(
            service={"journal_path": self._journal_path(), "metrics_enabled": False, "fsync": False,
                     "house_players": "thread", "node_id": "fuzz"},
            tables=[self.table_config()])
        bus = LocalBus()
        bus.subscribe(topics.events(TID), self._on_event)
        bus.subscribe(topics.player(TID, "+"), self._on_private)
        svc = self.svc = Service(settings, bus=bus, broker_link=False, clock=lambda: self.now)
        decide = svc.house.decide

        async def house(request: Any) -> Any:  # a fixed search size: the move depends on the request only
            return await decide(dataclasses.replace(request, playouts=HOUSE_PLAYOUTS))

        svc.house.decide = house  # type: ignore[method-assign]
        refused = svc._refused

        def refusal(r: Any, at: int) -> None:
            self.refusals.append(r)
            refused(r, at)

        svc._refused = refusal  # type: ignore[method-assign]
        apply = svc.core.apply

        def applied(item: Any, batch: Any) -> Any:
            table = svc.tables[item.table_id]
            cur = table.current
            turn = (cur.round_id, cur.turn) if cur is not None and cur.hand is not None else None
            before, rows = _snapshot(table), len(batch.events)
            step = apply(item, batch)
            self.applied.append(Applied(item, step, before, _snapshot(table), len(batch.events) > rows, turn))
            return step

        svc.core.apply = applied  # type: ignore[method-assign]
        rebuilt: list[bytes] = []
        adopted = svc.core.adopted

        def adopting(tid: str, table: Any, now: int) -> None:  # the table as the journal has it, before its Resume
            rebuilt.append(_snapshot(table))
            adopted(tid, table, now)

        svc.core.adopted = adopting  # type: ignore[method-assign]
        self.task = asyncio.create_task(svc.run(), name="fuzzed-service")
        await self._until(lambda: svc.ready.is_set(), "the service did not start")
        table = svc.tables[TID]
        fields = _differences(self.live, rebuilt[0]) if self.live is not None and rebuilt[0] != self.live else []
        self.live = None
        self._guard(table)
        self.session_left = self.state_rng.randrange(*SESSION_INPUTS)
        await self._settle()
        self._clear()
        if fields:
            raise Violation(f"the table rebuilt from the journal differs from the table that was live: {fields}",
                                 key="replay differs from the live table")

    def _guard(self, table: Any) -> None:
        """Remember an exception of ``table.handle``: the commit loop turns one into an "internal
        error" refusal, which would hide it."""
        inner = table.handle

        def handle(ev: Any) -> Any:
            try:
                return inner(ev)
            except Exception as exc:
                self.core_error = exc
                raise

        table.handle = handle

    async def _stop(self) -> None:
        """Stop the service (as SIGTERM does), then check its journal."""
        from dealer.edge.journal import Journal

        svc, task = self.svc, self.task
        self.task = None
        self.live = _snapshot(svc.tables[TID]) if TID in svc.tables else None
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        gc.unfreeze()  # the service froze the collector's view at its start
        journal = Journal.open_read_only(self._journal_path())
        try:
            report = journal.verify_chain()
            if not report.ok:
                raise Violation(f"the journal's hash chain does not verify: {report}"[:300],
                                     key="journal chain does not verify")
            turns: dict[tuple[str | None, int], int] = {}
            for row in journal.live_rows(TID):
                if row.type not in ("player_action", "action_timeout"):
                    continue
                body = json.loads(row.body)
                if body.get("reserve") or body.get("turn") is None:
                    continue
                key = (row.round_id, int(body["turn"]))
                if key in turns:
                    raise Violation(f"the journal holds two actions for turn {key[1]} of round {key[0]} "
                                         f"(rows {turns[key]} and {row.id})", key="two actions journaled for a turn")
                turns[key] = row.id
        finally:
            journal.close()

    def _ensure(self) -> None:
        if self.task is None:
            self.loop.run_until_complete(self._start())
        elif self.task.done():
            raise Violation("the service stopped by itself", key="service stopped")

    async def _until(self, cond: Any, what: str) -> None:
        deadline = time.monotonic() + SETTLE_S
        while not cond():
            if self.task is not None and self.task.done():
                exc = None if self.task.cancelled() else self.task.exception()
                raise Violation(f"the service stopped: {exc!r}"[:300], key="service stopped")
            if time.monotonic() > deadline:
                raise Violation(what, key=what)
            await asyncio.sleep(0.001)

    async def _settle(self) -> None:
        """Until the service is quiet: nothing queued, no batch in hand, no publish or house move
        on its way."""
        svc = self.svc
        core, house = svc.core, svc.house
        deadline = time.monotonic() + SETTLE_S
        quiet = 0
        while quiet < 2:
            if self.task is not None and self.task.done():
                exc = None if self.task.cancelled() else self.task.exception()
                raise Violation(f"the service stopped: {exc!r}"[:300], key="service stopped")
            if time.monotonic() > deadline or len(self.applied) > 2000:
                from collections import Counter

                kinds = Counter(r.item.event.type for r in self.applied[-500:]).most_common(3)
                raise Violation(f"the service did not go quiet ({len(self.applied)} events applied, lately "
                                     f"{kinds})", key="service did not go quiet")
            busy = svc._queue.qsize() or core.batch_tables
            tasks = svc._tasks | {t for t in house._tasks if not t.done()}
            if busy:
                quiet = 0
                changed = core._changed
                try:
                    async with asyncio.timeout(0.05):
                        await changed.wait()
                except TimeoutError:
                    pass
            elif tasks:
                quiet = 0
                await asyncio.wait(tasks, timeout=0.05)
            else:
                quiet += 1
                await asyncio.sleep(0)

    # -- the table as a client sees it ----------------------------------------------------

    @property
    def table(self) -> Any:
        return self.svc.tables[TID]

    def _round(self) -> Any:
        """The round in play, or None between rounds."""
        from dealer.core.round import ACTIVE

        cur = self.table.current
        return cur if cur is not None and cur.phase in ACTIVE else None

    def _round_id(self) -> str:
        cur = self.table.current
        return cur.round_id if cur is not None else f"{TID}-000001"

    def _seated(self, cur: Any) -> list[str]:
        return sorted(set(cur.seat_owner.values())) if cur is not None else []

    # -- generating ---------------------------------------------------------------------------

    def generate(self, rng: random.Random) -> tuple[str, bytes]:
        self._ensure()
        from dealer.edge import roles

        r = rng.random()
        if r < 0.04 and self.recent:  # delivered again (QoS 1), or retried by its sender
            return rng.choice(self.recent)
        if r < 0.10:
            return TIMER, json.dumps(self._timer(rng)).encode()
        doc = self._command(rng)
        role = roles.SENDER.get(str(doc.get("type")), roles.Role.PLAYER_PLATFORM)
        doc = self._address(doc, rng)
        if rng.random() < 0.05:
            role = rng.choice((roles.Role.PLAYER_PLATFORM, roles.Role.STATION))
        if rng.random() < 0.08:
            doc = mutate_tree(doc, rng, self.corpus.keys, self.corpus.strings)
        inp = (roles.command_topic(role, TID), encode_text(dump_json(doc))[:MAX_INPUT])
        self.recent = (self.recent + [inp])[-20:]
        return inp

    def _timer(self, rng: random.Random) -> dict[str, Any]:
        """A timer's event: the current turn's or window's (it acts for the player), or a stale one."""
        cur = self.table.current
        turn = cur.turn if cur is not None and cur.turn else 1
        deadline = cur.action_deadline if cur is not None else None
        r = rng.random()
        if r < 0.15:
            deadline = rng.choice((None, (deadline or self.now) + rng.choice((-1, 1, 1000))))
        if rng.random() < 0.25:
            turn = max(1, turn + rng.choice((-1, -1, 1, 2)))
        if cur is not None and cur.confirm_deadline is not None and rng.random() < 0.7:
            step = cur.expected_position or "LAST_CARD"
            return {"type": "confirm_timeout", "step": step if rng.random() < 0.8 else "SHUFFLE",
                    "deadline": cur.confirm_deadline if r >= 0.15 else deadline}
        if rng.random() < 0.05:
            return {"type": "decision_timeout", "deadline": deadline}
        return {"type": "action_timeout", "turn": turn, "deadline": deadline}

    def _command(self, rng: random.Random) -> dict[str, Any]:
        from dealer.core.round import Phase

        cur = self._round()
        phase = cur.phase if cur is not None else None
        r = rng.random()
        if phase == Phase.ACTION:
            if r < 0.45:
                return self._act(rng, cur, cur.hand.to_act, valid=True)
            if r < 0.57:
                others = [p for p in self.players if p != cur.hand.to_act]
                return self._act(rng, cur, rng.choice(others), valid=rng.random() < 0.7)
            if r < 0.74:
                return self._act(rng, cur, cur.hand.to_act, valid=False)
            if r < 0.84:
                return self._reserve(rng, cur)
            if r < 0.88:
                return self._bet(rng, cur)
            return self._station(rng, cur)
        if phase == Phase.BETTING_OPEN:
            if r < 0.55:
                return self._bet(rng, cur)
            if r < (0.70 if len(cur.seat_owner) >= cur.rules.game.min_players else 0.58):
                return {"type": "close_betting", "by": "dealer" if rng.random() < 0.95 else "timer"}
            if r < 0.82:
                return self._act(rng, cur, rng.choice(self.players), valid=False)
            if r < 0.88:
                return self._reserve(rng, cur)
            return self._station(rng, cur)
        if phase is not None:  # dealing, a confirmation held open for the station
            if r < 0.55:
                return self._station(rng, cur)
            if r < 0.75:
                return self._act(rng, cur, rng.choice(self.players), valid=False)
            if r < 0.85:
                return self._reserve(rng, cur)
            return self._bet(rng, cur)
        if r < 0.4:  # between rounds: everything is for a round that is over
            return self._act(rng, None, rng.choice(self.players), valid=False)
        if r < 0.7:
            return self._bet(rng, None)
        return self._station(rng, None)

    def _address(self, doc: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        """Name the command as a client does: a fresh id, the round, the turn; now and then an
        id used before, an earlier round or turn, or nothing (refused)."""
        cur = self.table.current
        r = rng.random()
        if r < 0.04:  # an id that spells a card: answered like any other, whether the card is hidden or not
            doc["command_id"] = rng.choice(("", "c-", "x.")) + self._a_card(rng)
            self.recent_ids = (self.recent_ids + [doc["command_id"]])[-20:]
        elif r < 0.88 or not self.recent_ids:
            doc["command_id"] = f"fz-{rng.getrandbits(48):012x}"
            self.recent_ids = (self.recent_ids + [doc["command_id"]])[-20:]
        elif r < 0.97:
            doc["command_id"] = rng.choice(self.recent_ids)
        if doc.get("type") == "dealer_logon":
            return doc
        r = rng.random()
        if r < 0.9:
            doc["round_id"] = self._round_id()
        elif r < 0.96 and self.last_rounds:
            doc["round_id"] = rng.choice(self.last_rounds)
        elif r < 0.98:
            doc["round_id"] = rng.choice(("G2-000001", f"{TID}-999999", self._round_id() + "x", self._a_card(rng),
                                          f"{TID}-{self._a_card(rng)}"))
        if doc.get("type") == "player_action" and not doc.get("reserve"):
            turn = cur.turn if cur is not None and cur.turn else 1
            r = rng.random()
            if r < 0.84:
                doc["turn"] = turn
            elif r < 0.97:
                doc["turn"] = max(1, turn + rng.choice((-2, -1, -1, 1)))
        elif doc.get("reserve") and rng.random() < 0.1 and cur is not None:
            doc["turn"] = cur.turn or 1
        return doc

    def _a_card(self, rng: random.Random) -> str:
        """A card code of the game: of the round in play (registered, hidden or not) mostly."""
        cur = self.table.current
        dealt = sorted(cur.cards.values()) if cur is not None else []
        return rng.choice(dealt) if dealt and rng.random() < 0.8 else rng.choice(self.deck)

    @property
    def deck(self) -> list[str]:
        return sorted(self.table.rules.game.deck)

    def _bet(self, rng: random.Random, cur: Any) -> dict[str, Any]:
        """A player sits down (a ``chips`` bet naming a seat): mostly valid, else a seat taken, a
        seat the table does not have, a stake too small or not of the money unit, a second buy-in."""
        seated = cur.seat_owner if cur is not None else {}
        free = [s for s in range(1, self.seats + 1) if s not in seated]
        player = rng.choice([p for p in self.players if p not in seated.values()] or list(self.players))
        seat = rng.choice(free) if free else rng.randint(1, self.seats)
        stake, bet_type = rng.choice(self.stakes), self.chips_bet
        r = rng.random()
        if r < 0.10 and seated:
            seat = rng.choice(list(seated))
        elif r < 0.18 and seated:
            player = rng.choice(list(seated.values()))
        elif r < 0.26:
            stake = rng.choice(self.bad_stakes)
        elif r < 0.30:
            seat = rng.choice((self.seats + 1, 99))
        elif r < 0.34:
            bet_type = rng.choice(("ante", "player_a", "cover" if self.chips_bet == "chips" else "chips"))
        bet_id = f"b-{rng.getrandbits(32):08x}" if rng.random() < 0.95 else self._a_card(rng)
        if rng.random() < 0.03:  # a player whose id spells a card
            player = self._a_card(rng)
        doc: dict[str, Any] = {"type": "place_bet", "bet_id": bet_id, "player_id": player,
                               "bet_type": bet_type, "stake": stake, "seat": seat}
        if rng.random() < 0.03:
            del doc["seat"]
        return doc

    def _act(self, rng: random.Random, cur: Any, player: str | None, *, valid: bool) -> dict[str, Any]:
        """``player``'s answer to the turn running: legal, or well formed but wrong."""
        player = player or rng.choice(self.players)
        if not valid and rng.random() < 0.05:
            player = self._a_card(rng)
        turn = cur.hand.turn_options() if cur is not None and cur.hand is not None and cur.hand.to_act else {}
        fields = self.valid_action(rng, turn) if valid and turn else self.wrong_action(rng, turn)
        return {"type": "player_action", "player_id": player, **fields}

    def _reserve(self, rng: random.Random, cur: Any) -> dict[str, Any]:
        """A reservation (Seotda's §6.2; refused in the other games): by a player who is not to
        act, or at the wrong moment."""
        seated = self._seated(cur)
        player = rng.choice(seated if seated and rng.random() < 0.85 else list(self.players))
        doc = {"type": "player_action", "player_id": player, "reserve": True,
               "action": rng.choice(self.reserve_actions)}
        if rng.random() < 0.1:
            doc["amount"] = rng.choice(("10", "1.00", "0"))
        return doc

    reserve_actions: tuple[str, ...] = ("CHECK", "CALL", "FOLD", "BET", "RAISE")

    def _station(self, rng: random.Random, cur: Any) -> dict[str, Any]:
        """The dealer station: a confirmation (of the step awaited, or another), an exposed card,
        closing the betting, a dealer's log-on."""
        awaited = cur.expected_position if cur is not None else None
        r = rng.random()
        if r < 0.45:
            step = awaited if awaited and rng.random() < 0.7 else rng.choice(("SHUFFLE", "WASH", "LAST_CARD", "DEAL"))
            return {"type": "dealer_confirm", "step": step}
        if r < 0.75:
            return {"type": "card_exposed", "position": self.exposed_position(rng, cur)}
        if r < 0.9:
            return {"type": "close_betting", "by": "dealer"}
        return {"type": "dealer_logon", "dealer_id": rng.choice(("d-ana", "d-bo", "AS", "01G"))}

    # -- the game's part (overridden) ----------------------------------------------------

    def valid_action(self, rng: random.Random, turn: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def wrong_action(self, rng: random.Random, turn: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def exposed_position(self, rng: random.Random, cur: Any) -> str:
        return rng.choice(("P1.7", "P2.3", "S1.2", "F.1", "BURN1"))

    def card_for(self, cur: Any, pos: Any) -> str | None:
        """A card the deck may give at ``pos`` now (None: the shoe's next)."""
        return None

    def check_result(self, result: Any) -> None:
        raise NotImplementedError

    # -- checking ------------------------------------------------------------------------------

    def from_bytes(self, data: bytes) -> tuple[str, bytes]:
        from dealer.edge import topics

        leaf = ("actions", "station", "actions")[len(data) % 3]
        return topics.table_topic(TID, leaf), data

    def to_bytes(self, inp: Any) -> bytes:
        return inp[1]

    def check(self, inp: tuple[str, bytes]) -> bool:
        self._ensure()
        return self.loop.run_until_complete(self._check(inp))

    def _on_event(self, topic: str, payload: bytes) -> None:
        self.events.append(json.loads(payload))

    def _on_private(self, topic: str, payload: bytes) -> None:
        self.private.append(json.loads(payload))

    async def _check(self, inp: tuple[str, bytes]) -> bool:
        from dealer.core.events import EVENT_ADAPTER

        topic, payload = inp
        self.now += 40
        self._clear()
        if topic == TIMER:
            fut = self.svc.submit(TID, EVENT_ADAPTER.validate_json(payload))
            await self._settle()
            self._verify()
            accepted = bool(fut.done() and not fut.cancelled() and fut.result().accepted)
        else:
            await self.svc.bus.publish(topic, payload)
            await self._settle()
            self._verify()
            accepted = self._answered(topic, payload)
        await self._advance()
        self.session_left -= 1
        if self.session_left <= 0:
            await self._stop()
            await self._start()
        return accepted

    def _clear(self) -> None:
        del self.applied[:], self.events[:], self.private[:], self.refusals[:]
        self.verified = 0

    def _verify(self) -> None:
        """The invariants of every event the commit loop applied since the last look."""
        from dealer.core.messages import RoundEvent, RoundResult

        if self.core_error is not None:
            exc, self.core_error = self.core_error, None
            raise exc
        if self.errors:
            first, n = self.errors[0], len(self.errors)
            del self.errors[:]
            raise Violation(f"{first} ({n} in all)", key=first[:60])
        fresh, self.verified = self.applied[self.verified:], len(self.applied)
        for rec in fresh:
            ev, step = rec.item.event, rec.step
            what = ev.type
            changed = rec.changed if not (step.accepted and rec.journaled) else ""
            if not step.accepted and changed:
                raise Violation(f"a refused {what} changed the table ({changed}; {step.rejection})"[:300],
                                     key=f"a refused {what} changed the table")
            if not rec.journaled and changed:
                raise Violation(f"a {what} that was not journaled changed the table ({changed})"[:300],
                                     key=f"an unjournaled {what} changed the table")
            if not step.accepted and not (step.rejection is not None and step.rejection.reason.strip()) \
                    and not self.refusals:
                raise Violation(f"a {what} was refused without a reason", key="refused without a reason")
            cmd = rec.item.cmd
            if cmd is not None:
                key = (rec.item.table_id, cmd.role.value, cmd.command_id)
                if self.accepted_ids.get(key) == cmd.digest and (rec.journaled or rec.changed):
                    raise Violation(f"{what} {cmd.command_id} sent again was applied again",
                                         key="a command sent again was applied again")
                if step.accepted and rec.journaled:
                    self.accepted_ids[key] = cmd.digest
            acted = [e for e in step.effects if isinstance(e, RoundEvent) and e.event == "player_acted"]
            if step.accepted and rec.journaled and what in ("player_action", "action_timeout") \
                    and not getattr(ev, "reserve", False):
                by = "timeout" if what == "action_timeout" else "player"
                mine = [a for a in acted if a.data.get("by") == by]
                if len(mine) != 1 or (by == "player" and mine[0].data.get("player_id") != ev.player_id):
                    raise Violation(f"an accepted {what} made {len(mine)} player_acted by {by} "
                                         f"({[a.data.get('player_id') for a in mine]})",
                                         key=f"an accepted {what} is not one action of its player")
                if rec.round_turn is not None:
                    rid, turn = rec.round_turn
                    done = self.acted.setdefault(rid, set())
                    if turn in done:
                        raise Violation(f"turn {turn} of round {rid} was acted on twice",
                                             key="a turn was acted on twice")
                    done.add(turn)
                self._count(f"{'timeout' if by == 'timeout' else 'action'}:{mine[0].data.get('action')}")
            if what == "player_action" and getattr(ev, "reserve", False) and step.accepted:
                self._count("reservation")
                if acted:
                    raise Violation("an accepted reservation acted at once", key="a reservation acted at once")
            for e in step.effects:
                if isinstance(e, RoundEvent) and e.event in ("rematch", "reservation_executed", "card_exposed"):
                    self._count(e.event)
                if isinstance(e, RoundResult):
                    if e.idempotency_key in self.result_keys:
                        raise Violation(f"a second result for round {e.round_id}", key="a second result")
                    self.result_keys.add(e.idempotency_key)
                    self._count(f"result:{e.outcome}")
                    self.check_result(e)
        if len(self.result_keys) > 10_000:
            self.result_keys.clear()

    def _count(self, what: str) -> None:
        self.reached[what] = self.reached.get(what, 0) + 1

    def _answered(self, topic: str, payload: bytes) -> bool:
        """One clear answer to the command: one ``rejected`` event for a refusal, one answer on
        the player's topic for an accepted player command. True: accepted."""
        try:
            doc = json.loads(payload)
        except (ValueError, RecursionError):
            doc = None
        from dealer.edge import ingress

        cid = ingress._id_of(doc, "command_id") if isinstance(doc, dict) else None  # as an answer names it
        if len(payload) > ingress.MAX_COMMAND_BYTES or ingress.too_deep(payload):
            cid = None  # refused unread: its answer names no id
        mine = [r for r in self.applied if r.item.cmd is not None and r.item.cmd.command_id == cid]
        rejected = [e for e in self.events if e.get("event") == "rejected" and e["data"].get("command_id") == cid]
        for answer in rejected + [m for m in self.private if m["kind"] == "rejected"]:
            need(HIDDEN_TEXT not in str(answer["data"].get("reason")),
                       f"a refusal says whether a card is hidden: {answer['data'].get('reason')!r}"[:300],
                       key="a refusal tells whether a card is hidden")
        if not mine or not mine[0].step.accepted:  # refused at the edge, or by the table
            need(len(rejected) == 1 and bool(str(rejected[0]["data"].get("reason", "")).strip()),
                       f"a refused command was answered by {len(rejected)} rejected events, not one with a reason",
                       key="a refusal not answered once")
            if mine:
                player = getattr(mine[0].item.event, "player_id", None)
                answers = [m for m in self.private if m["player_id"] == player and m["kind"] == "rejected"
                           and m["data"].get("command_id") == cid]
                need(player is None or len(answers) == 1,
                           f"a refused command of {player} was answered {len(answers)} times on its topic",
                           key="a refusal not answered once to its player")
            return False
        rec = mine[0]
        need(not rejected, "an accepted command was also answered as rejected", key="accepted and rejected")
        player = getattr(rec.item.event, "player_id", None)
        if player is not None:
            answers = [m for m in self.private if m["player_id"] == player and self._answers(m)]
            need(len(answers) == 1, f"an accepted {rec.item.event.type} of {player} was answered "
                       f"{len(answers)} times on its topic ({[a['kind'] for a in answers]})",
                       key="an accepted command not answered once to its player")
        return True

    @staticmethod
    def _answers(m: dict[str, Any]) -> bool:
        kind = m["kind"]
        return kind in ("bet_accepted", "reservation_accepted") or (
            kind == "action_accepted" and m["data"].get("by") == "player")

    # -- the dealer and the rounds --------------------------------------------------------------

    async def _advance(self) -> None:
        """The virtual dealer: deal what the round waits for, confirm the steps (a timed window is
        sometimes left open to the fuzzer), close a betting that drags on, open the next round
        after a few inputs between rounds, acknowledge results as settlement does."""
        from dealer.core.events import OpenRound, ResultDelivered
        from dealer.core.round import Phase
        from dealer.edge import topics

        rng, svc = self.state_rng, self.svc
        for _n in range(400):
            self._clear()
            cur = self._round()
            if cur is None:
                for rid, rnd in list(self.table.undelivered.items()):
                    if rnd.result is not None and rng.random() < 0.8:
                        svc.submit(TID, ResultDelivered(round_id=rid, idempotency_key=rnd.result.idempotency_key))
                        await self._settle()
                        self._verify()
                if self.pause > 0:
                    self.pause -= 1
                    return
                self.pause = rng.choice((0, 0, 1, 2, 4))
                opening = svc._opening(TID, self.now)
                seq = self.table.last_seq + 1  # the round ids carry the journal's random id: not them
                draw = hashlib.sha256(f"{self.seed}:{self.name}:{self.journal_no}:{seq}".encode()).hexdigest()
                fut = svc.submit(TID, opening.model_copy(update={"draw": draw}))
                await self._settle()
                self._verify()
                if not fut.result().accepted:
                    raise Violation(f"the table refused to open a round: {fut.result().rejection}",
                                         key="a round did not open")
                self.last_rounds = (self.last_rounds + [opening.round_id])[-5:]
                self.betting_inputs, self.held, self.forced = 0, 0, self.scenario(rng)
                return
            if cur.phase == Phase.BETTING_OPEN:
                self.betting_inputs += 1
                if self.betting_inputs < 25:
                    return
                least = cur.rules.game.min_players
                if len(cur.seat_owner) < least:  # too few sit: the players sit as clients would
                    for seat, player in enumerate(self.players[: rng.randint(least, max(least, self.seats))], start=1):
                        if seat not in cur.seat_owner and player not in cur.seat_owner.values():
                            await self._send(topics.actions(TID), {
                                "type": "place_bet", "bet_id": f"sit-{rng.getrandbits(32):08x}", "player_id": player,
                                "bet_type": self.chips_bet, "stake": self.stakes[0], "seat": seat})
                await self._send(topics.station(TID), {"type": "close_betting", "by": "dealer"})
                continue
            if cur.phase == Phase.ACTION:
                return
            if cur.phase not in (Phase.BETTING_CLOSED, Phase.DEALING):
                return  # a decision game's phase: not these games
            pos = cur.plan[cur.next_index]
            if pos.confirm:
                if pos.window_ms and self.held == 0 and rng.random() < 0.6:
                    self.held = rng.randint(1, 6)  # the station's window to report an exposed card
                if pos.window_ms and self.held > 0:
                    self.held -= 1
                    if self.held > 0:
                        return
                await self._send(topics.station(TID), {"type": "dealer_confirm", "step": pos.name})
                continue
            await self._deal(cur, rng)
        raise Violation("the dealer could not finish the round in 400 steps", key="round stuck")

    async def _send(self, topic: str, doc: dict[str, Any]) -> None:
        doc = {"command_id": f"drv-{self.state_rng.getrandbits(48):012x}", "round_id": self._round_id(), **doc}
        await self.svc.bus.publish(topic, json.dumps(doc).encode())
        await self._settle()
        self._verify()

    async def _deal(self, cur: Any, rng: random.Random) -> None:
        """Pass the cards the plan expects next, up to its next confirmation, as the shoe reads
        them (a wrong card now and then: a duplicate or a foreign one, which asks for a rescan)."""
        from dealer.edge import topics

        codes: list[str] = []
        taken: set[str] = set()
        for pos in cur.plan[cur.next_index:]:
            if pos.confirm:
                break
            used = {cur.cards[p.name] for p in cur.plan if p.deck == pos.deck and p.name in cur.cards}
            used |= set(cur.set_aside) | taken
            code = self.card_for(cur, pos)
            if code is None or code in used or code not in cur.rules.game.deck:
                shoe = self.shoes.setdefault((cur.round_id, pos.deck), rng.sample(sorted(cur.rules.game.deck),
                                                                                  len(cur.rules.game.deck)))
                code = next((c for c in shoe if c not in used), None)
            if code is None:
                break
            if not codes and rng.random() < 0.02:  # a dealer's mistake: the station asks for a rescan
                code = rng.choice(self.foreign_cards + tuple(sorted(used)[:3]))
                codes.append(code)
                break
            codes.append(code)
            taken.add(code)
        for code in codes or ["??"]:
            self.seq += 1
            msg = {"schema_id": "studio.v1.scanner", "reader": READER, "seq": self.seq % 2**32,
                   "status": "OK" if code != "??" else "NOREAD", "payload": code if code != "??" else ""}
            await self.svc.bus.publish(topics.scanner(TID), json.dumps(msg).encode())
        await self._settle()
        self._verify()
        if len(self.shoes) > 50:
            self.shoes.clear()

    def scenario(self, rng: random.Random) -> dict[str, str]:
        """Cards forced at positions in the next round (Seotda: a 9·4, a draw): position -> card."""
        return {}
