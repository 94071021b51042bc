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
import dataclasses
import gc
import hashlib
import json
import logging
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from simulators.feed import events_of
from tools.fuzz_inputs import Violation
from tools.fuzz_target import Target, guard_core, need
from tools.fuzz_game_state import (
    Applied,
    BENIGN_ERRORS,
    EPOCH_MS,
    HIDDEN_TEXT,
    HOUSE_PLAYOUTS,
    READER,
    SESSIONS_PER_JOURNAL,
    SESSION_INPUTS,
    SETTLE_S,
    TID,
    TIMER,
    differences,
    snapshot,
)
from tools.fuzz_game_commands import GameCommands


class GameCommandsTarget(GameCommands, Target):
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
        self.now = EPOCH_MS
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
        bus.subscribe(topics.events(TID), self._on_event)  # refusals
        bus.subscribe(topics.state(TID), events_of(self._on_event))
        bus.subscribe(topics.player(TID, "+"), self._on_private)
        svc = self.svc = Service(settings, bus=bus, broker_link=False, clock=lambda: self.now)
        decide = svc.house.decide

        async def house(request: Any) -> Any:  # a fixed search size: the move depends on the request only
            return await decide(dataclasses.replace(request, playouts=HOUSE_PLAYOUTS))

        svc.house.decide = house  # type: ignore[method-assign]  # the fuzzer swaps in a fixed-size search on purpose
        svc.refusals.observers.append(self.refusals.append)  # every refusal, at the ingress or the commit loop
        apply = svc.commit_loop.apply

        def applied(item: Any, batch: Any) -> Any:
            table = svc.tables[item.table_id]
            cur = table.current
            turn = (cur.round_id, cur.turn) if cur is not None and cur.hand is not None else None
            before, rows = snapshot(table), len(batch.events)
            step = apply(item, batch)
            self.applied.append(Applied(item, step, before, snapshot(table), len(batch.events) > rows, turn))
            return step

        svc.commit_loop.apply = applied  # type: ignore[method-assign]  # the fuzzer wraps the method to watch each apply
        rebuilt: list[bytes] = []
        adopted = svc.commit_loop.adopted

        def adopting(tid: str, table: Any, now: int) -> None:  # the table as the journal has it, before its Resume
            rebuilt.append(snapshot(table))
            adopted(tid, table, now)

        svc.commit_loop.adopted = adopting  # type: ignore[method-assign]  # the fuzzer wraps the method to watch each adoption
        self.task = asyncio.create_task(svc.run(), name="fuzzed-service")
        await self._until(lambda: svc.ready.is_set(), "the service did not start")
        table = svc.tables[TID]
        fields = differences(self.live, rebuilt[0]) if self.live is not None and rebuilt[0] != self.live else []
        self.live = None
        self._guard(table)
        self.session_left = self.state_rng.randrange(*SESSION_INPUTS)
        await self._settle()
        self._clear()
        if fields:
            raise Violation(f"the table rebuilt from the journal differs from the table that was live: {fields}",
                                 key="replay differs from the live table")

    def _guard(self, table: Any) -> None:
        guard_core(table, self._remember)

    def _remember(self, exc: BaseException) -> None:
        self.core_error = exc

    async def _stop(self) -> None:
        """Stop the service (as SIGTERM does), then check its journal."""
        from dealer.edge.journal import Journal

        svc, task = self.svc, self.task
        self.task = None
        self.live = snapshot(svc.tables[TID]) if TID in svc.tables else None
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
        core, house = svc.commit_loop, svc.house
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
            busy = svc.queue.items.qsize() or core.batch_tables
            tasks = svc.background.running | house.deciding
            if busy:
                quiet = 0
                changed = core.changed
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
        from dealer.core.events import ResultDelivered
        from dealer.core.round import Phase
        from dealer.edge import topics
        from dealer.edge.openings import opening as edge_opening

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
                opening = edge_opening(svc.tables[TID], svc.configs[TID], self.now)
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
