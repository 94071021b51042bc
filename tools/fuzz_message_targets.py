"""Fuzz targets of the backend's messages and config: players' actions, round events, the
published message models, actions applied to a live table (refusals change nothing) and the
TOML config ``load_settings`` reads."""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import tempfile
from pathlib import Path
from typing import Any

from tools.fuzz_inputs import (
    MAX_INPUT,
    MSG_LIMIT,
    Raw,
    Violation,
    deep,
    dump_json,
    dump_toml,
    encode_text,
    mutate_bytes,
    mutate_tree,
    tree_slots,
    unicode_text,
)
from tools.fuzz_target import JsonTarget, Target, guard_core, need


class ActionsTarget(JsonTarget):
    name = "actions"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from dealer.core.events import ACTION_ADAPTER

        self.adapter = ACTION_ADAPTER

    def own_seeds(self) -> list[dict[str, Any]]:
        return self.corpus.actions

    def parse(self, data: bytes) -> Any:
        return self.adapter.validate_json(data)

    def dump(self, obj: Any) -> bytes:
        return self.adapter.dump_json(obj)


class EventsTarget(ActionsTarget):
    name = "events"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from dealer.core.events import EVENT_ADAPTER

        self.adapter = EVENT_ADAPTER

    def own_seeds(self) -> list[dict[str, Any]]:
        return self.corpus.events


class _MessageTarget(JsonTarget):
    model_name = ""

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from dealer.core import messages

        self.model = getattr(messages, self.model_name)

    def own_seeds(self) -> list[dict[str, Any]]:
        return self.corpus.messages[self.name]

    def parse(self, data: bytes) -> Any:
        return self.model.model_validate_json(data)


class RoundResultTarget(_MessageTarget):
    name, model_name = "round_result", "RoundResult"


class PlayerMessageTarget(_MessageTarget):
    name, model_name = "player_message", "PlayerMessage"


class StationPromptTarget(_MessageTarget):
    name, model_name = "station_prompt", "StationPrompt"


class RoundEventTarget(_MessageTarget):
    name, model_name = "round_event", "RoundEvent"


def _table_state(table: Any) -> tuple[Any, ...]:
    cur = table.current
    rnd = None if cur is None else (id(cur), cur.round_id, cur.phase, tuple(cur.bets), tuple(cur.cards.items()),
                                    tuple(cur.decisions), cur.next_index, cur.reject_count, cur.result is None)
    return rnd, tuple(table.undelivered), tuple(sorted(table.links_down.items())), table.last_seq


class ServiceActionsTarget(JsonTarget):
    """``Inputs.on_command`` (``Service._on_action`` was its old name) with a real Service (LocalBus,
    journal in a temp folder), fed on every command topic: it may not raise and changes no
    table directly. What ``dealer.edge.roles`` and the schema refuse (another role's command, a
    command without its ``command_id``, ``round_id`` or ``turn``, an unsigned supervisor's
    command, a malformed one, an unknown table) is refused once with a reason and answered
    with one published ``rejected`` event; what they accept is queued unchanged, reads back
    from its own JSON (as the journal will), and the core, command-id check included (a
    repeat answered again, a reused id refused), handles it without raising (a refusal
    carries a reason). Inputs are addressed like a real client's: a fresh ``command_id``,
    the table's round, its role's topic, and sometimes an exact repeat of a recent command."""

    name = "service_actions"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from dealer.edge import ingress, roles, topics
        from dealer.edge.config import load_settings
        from dealer.core.events import (
            ACTION_ADAPTER,
            EVENT_ADAPTER,
            CloseBetting,
            OpenRound,
            PlaceBet,
            ScanRead,
        )
        from dealer.games.matgo import AI_PLAYER
        from dealer.edge.journal import Batch
        from dealer.core.messages import RoundEvent
        from dealer.core.round import ACTIVE
        from dealer.edge.service import Service
        from dealer.core.table import Table
        from drivers.bus import LocalBus

        self.allowed = ()
        self.topics, self.adapter, self.RoundEvent, self.Table, self.ACTIVE = topics, ACTION_ADAPTER, RoundEvent, Table, ACTIVE
        self.roles, self.event_adapter, self.Batch, self.ai_player = roles, EVENT_ADAPTER, Batch, AI_PLAYER
        self.max_bytes, self.too_deep = ingress.MAX_COMMAND_BYTES, ingress.too_deep
        self.ev = {"open": OpenRound, "bet": PlaceBet, "close": CloseBetting, "scan": ScanRead}
        self._tmp = tempfile.TemporaryDirectory(prefix="dealer-fuzz-")
        settings = load_settings(
            service={"journal_path": Path(self._tmp.name) / "journal.sqlite", "metrics_enabled": False, "fsync": False},
            tables=[{"id": "T1", "game": "teen-patti", "auto_rounds": False,
                     "limits": {"player_a": {"min": "1", "max": "1000"}},
                     "scanner": {"kind": "mqtt", "reader_id": "SC1"}},
                    {"id": "T2", "game": "sevenluck", "auto_rounds": False,
                     "scanner": {"kind": "mqtt", "reader_id": "SC2"}}])
        self.loop = asyncio.new_event_loop()
        self.svc = Service(settings, bus=LocalBus(), broker_link=False)
        self.refusals: list[Any] = []
        self.published: list[tuple[str, Any]] = []
        self.core_error: BaseException | None = None
        self.svc.refusals.observers.append(self.refusals.append)  # every refusal, at the ingress or the commit loop
        self.svc.add_observer(lambda kind, msg: self.published.append((kind, msg)))
        self.since_reset, self.reset_every = 0, 0
        self.players = ("p1", "p2", "p3", "p4")
        self.recent: list[tuple[str, bytes]] = []  # commands sent lately, to send one again exactly
        self.recent_ids: list[str] = []  # and their ids, to use one again for another command
        self.service_seeds = self._action_seeds()
        own = {"T1": {"player_a", "tie", "pair_plus_a", "six_card_bonus"}, "T2": {"ante", "pair_plus"}}
        self.table_seeds = {tid: [d for d in self.service_seeds if d.get("bet_type", next(iter(types))) in types]
                            for tid, types in own.items()}

    def _action_seeds(self) -> list[dict[str, Any]]:
        seeds: list[dict[str, Any]] = list(self.corpus.actions)
        for p in self.players:
            for bet_type, seat in (("player_a", None), ("tie", None), ("pair_plus_a", None), ("six_card_bonus", None),
                                   ("ante", 1), ("ante", 4), ("pair_plus", 2), ("ante", None)):
                for stake in ("1", "10.00", "0.5", "1000", "2.505"):
                    seeds.append({"type": "place_bet", "bet_id": f"{p}-{bet_type}-{stake}", "player_id": p,
                                  "bet_type": bet_type, "stake": stake, "seat": seat})
            seeds += [{"type": "player_decision", "player_id": p, "action": a} for a in ("PLAY", "FOLD", "RAISE")]
        seeds += [{"type": "close_betting", "by": b} for b in ("dealer", "dealer", "timer", "supervisor")]
        seeds += [{"type": "dealer_confirm", "step": s} for s in ("SHUFFLE", "WASH")]
        seeds.append({"type": "card_exposed", "position": "P3.7"})
        seeds.append({"type": "supervisor_void", "supervisor": "sup", "reason": "misdeal"})
        # a supervisor's command as a pit-boss console signs it (no supervisor key is configured here)
        seeds.append({"type": "supervisor_void", "command_id": "c-1", "supervisor": "sup-ana", "table_id": "T1",
                      "round_id": "T1-000001", "issued_at": 1767261690000, "reason": "shoe jammed",
                      "signature": "0" * 64})
        return seeds

    def close(self) -> None:
        async def _stop() -> None:
            await asyncio.sleep(0)

        self.loop.run_until_complete(_stop())
        self.loop.close()
        self.svc.writer.shutdown(wait=True)
        self.svc.journal.close()
        self._tmp.cleanup()

    def own_seeds(self) -> list[dict[str, Any]]:
        return self.corpus.actions

    def _address(self, doc: dict[str, Any], tid: str, rng: random.Random) -> dict[str, Any]:
        """Name the command as a client does: a fresh id, the table's round, the turn; now and
        then an id used before (a reused id), another round, or nothing (refused)."""
        table = self.svc.tables.get(tid)
        cur = table.current if table is not None else None
        r = rng.random()
        if r < 0.85 or not self.recent_ids:
            doc["command_id"] = f"fz-{rng.getrandbits(48):012x}"
            self.recent_ids = (self.recent_ids + [doc["command_id"]])[-20:]
        elif r < 0.95:
            doc["command_id"] = rng.choice(self.recent_ids)
        else:
            doc.pop("command_id", None)
        r = rng.random()
        if r < 0.9 and cur is not None:
            doc["round_id"] = cur.round_id
        elif r < 0.95:
            doc["round_id"] = f"{tid}-00000{rng.randrange(10)}"
        else:
            doc.pop("round_id", None)
        if doc.get("type") == "player_action" and not doc.get("reserve") and rng.random() < 0.9:
            doc["turn"] = cur.turn if cur is not None and getattr(cur, "turn", None) else rng.randint(1, 5)
        return doc

    def _topic_for(self, doc: dict[str, Any], tid: str, rng: random.Random) -> str:
        """Mostly the topic of the command's role; sometimes another role's (refused)."""
        role = self.roles.SENDER.get(str(doc.get("type")), self.roles.Role.PLAYER_PLATFORM)
        if rng.random() < 0.1:
            role = rng.choice((self.roles.Role.PLAYER_PLATFORM, self.roles.Role.STATION, self.roles.Role.SUPERVISOR))
        return self.roles.command_topic(role, tid)

    def generate(self, rng: random.Random) -> tuple[str, bytes]:
        r = rng.random()
        tid = rng.choice(("T1", "T2"))
        topic = self.topics.table_topic(tid, rng.choice(("actions", "station", "supervisor")))
        if r < 0.05:
            topic = rng.choice(("", "studio/v1/tables/T3/actions", "studio/v1/tables/T3/station", "studio/v1/tables",
                                self.topics.actions("T1") + "/x", self.topics.scanner("T1"), self.topics.events("T2"),
                                "studio/v2/tables/T1/station", unicode_text(rng)))
        elif r < 0.10 and self.recent:  # a command delivered again (QoS 1), or retried by its sender
            return rng.choice(self.recent)
        if r < 0.50:  # mostly what the table's phase expects, so valid commands get past the ingress and the core
            table = self.svc.tables.get(tid)
            phase = table.current.phase if table is not None and table.current is not None else None
            seeds = self.table_seeds.get(tid, self.service_seeds)
            if phase == "BETTING_OPEN" and rng.random() < 0.9:
                seeds = [d for d in seeds if d["type"] in ("place_bet", "close_betting")]
            elif phase == "DECISION" and rng.random() < 0.8:
                seeds = [d for d in seeds if d["type"] == "player_decision"]
            doc = dict(rng.choice(seeds if rng.random() < 0.8 else self.service_seeds))
            if "bet_id" in doc:
                doc["bet_id"] += f"-{rng.randrange(1000)}"
            doc = self._address(doc, tid, rng)
            if r >= 0.05:
                topic = self._topic_for(doc, tid, rng)
            if rng.random() < 0.3:
                doc = mutate_tree(doc, rng, self.corpus.keys, self.corpus.strings)
            inp = (topic, encode_text(dump_json(doc))[:MAX_INPUT])
            self.recent = (self.recent + [inp])[-20:]
            return inp
        data = super().generate(rng)
        named = re.search(rb'"type" ?: ?"([a-z_]{1,32})"', data[:4096])
        if r >= 0.05 and named is not None and rng.random() < 0.7:  # a damaged command, mostly on its role's topic
            topic = self._topic_for({"type": named.group(1).decode()}, tid, rng)
        return topic, data

    def from_bytes(self, data: bytes) -> tuple[str, bytes]:
        leaf = ("actions", "station", "supervisor")[len(data) % 3]
        return self.topics.table_topic("T1" if len(data) % 2 else "T2", leaf), data

    def to_bytes(self, inp: Any) -> bytes:
        return inp[1]

    def check(self, inp: tuple[str, bytes]) -> bool:
        return self.loop.run_until_complete(self._check(inp))

    def _expected(self, topic: str, payload: bytes) -> Any | None:
        """The event the rules make of this command, or None when they refuse it: judged from
        ``dealer.edge.roles`` and the schema, not by the ingress under test."""
        where = self.roles.role_of_topic(topic)
        if where is None or where[0] not in self.svc.tables or len(payload) > self.max_bytes or self.too_deep(payload):
            return None
        tid, role = where
        try:
            ev = self.adapter.validate_python(json.loads(payload))
        except (ValueError, RecursionError, *self.validation_error):
            return None
        if ev.type not in self.roles.COMMANDS[role] or role is self.roles.Role.SUPERVISOR:
            return None  # another role's command; no supervisor key is configured here
        if not getattr(ev, "command_id", None) or not getattr(ev, "round_id", None):
            return None
        if ev.type == "player_action" and ev.turn is None and not ev.reserve:
            return None
        if getattr(ev, "player_id", None) == self.ai_player or (ev.type == "close_betting" and ev.by != "dealer"):
            return None
        player = getattr(ev, "player_id", None)
        if player is not None and ("." in player or self.roles.is_role_user(player)):
            return None  # unroutable on some brokers, or a broker role's user name (dealer/edge/ingress.py)
        if player in self.svc.tables[tid].rules.game.deck:
            return None  # a player id that spells a card of the game (dealer/edge/inputs.py)
        return ev

    def _apply(self, item: Any) -> Any:
        """The commit loop's handling of one queued item; an exception of the core is re-raised
        (the service would log it and answer "internal error")."""
        self.core_error = None
        step = self.svc.commit_loop.apply(item, self.Batch())
        if self.core_error is not None:
            raise self.core_error
        return step

    async def _check(self, inp: tuple[str, bytes]) -> bool:
        topic, payload = inp
        svc = self.svc
        self.since_reset += 1
        if self.since_reset > self.reset_every or any(
                t.current is None or t.current.phase not in self.ACTIVE for t in svc.tables.values()):
            self._reset()
        before = {tid: _table_state(t) for tid, t in svc.tables.items()}
        del self.refusals[:], self.published[:]
        svc.inputs.on_command(topic, payload)
        need({tid: _table_state(t) for tid, t in svc.tables.items()} == before, "_on_command changed a table directly")
        queued = []
        while not svc.queue.items.empty():
            queued.append(svc.queue.items.get_nowait())
        commands = [i for i in queued if i.cmd is not None]
        expected = self._expected(topic, payload)
        if expected is None:
            need(not commands, "a command the rules refuse was queued")
            need(len(self.refusals) == 1 and bool(self.refusals[0].reason.strip()) and bool(self.refusals[0].kind),
                  "a refused command was not refused once with a reason")
            refusal = self.refusals[0]
            rejected = [m for k, m in self.published if isinstance(m, self.RoundEvent) and m.event == "rejected"]
            if refusal.table_id is None:
                need(self.roles.role_of_topic(topic) is None or self.topics.table_of(topic) not in svc.tables,
                      "a command for a known table was refused as for no table")
                need(not rejected, "a rejected event was published for an unknown table")
            else:
                need(len(rejected) == 1 and bool(str(rejected[0].data.get("reason", "")).strip()),
                      "a refused command did not publish one rejected event with a reason")
            need(all(i.cmd is None and refusal.security for i in queued), "a refusal queued something else than "
                  "its security event", key="refusal queued")
            for item in queued:  # the security event: journaled and alerted, changes no round
                step = self._apply(item)
                need(step.accepted and step.journal, "a security event was not journaled")
                svc.releaser.release(item, step)
            await asyncio.sleep(0)
            return False
        need(not self.refusals, f"a command the rules accept was refused: {self.refusals[:1]}",
              key="a command the rules accept was refused")
        need(len(queued) == 1, f"a valid command queued {len(queued)} events")
        item = queued[0]
        need(item.table_id == self.topics.table_of(topic) and item.event == expected.model_copy(update={"at": item.event.at}),
              "the queued event differs from the command")
        try:  # the journal keeps it as JSON and replays it from there
            again = self.event_adapter.validate_json(item.event.model_dump_json())
        except self.validation_error as exc:
            raise Violation(f"an accepted command does not read back from its own JSON: {exc}"[:MSG_LIMIT],
                            key="accepted command does not read back") from None
        need(again == item.event, "an accepted command reads back different from its own JSON")
        item.future = None
        del self.refusals[:]
        step = self._apply(item)
        if not step.accepted:
            rej = step.rejection
            need((rej is not None and bool(rej.reason.strip()))
                  or (len(self.refusals) == 1 and bool(self.refusals[0].reason.strip())), "a refused command without a reason")
        svc.releaser.release(item, step)
        while not svc.queue.items.empty():  # a refusal in the commit loop (a reused id) may queue its security event
            extra = svc.queue.items.get_nowait()
            svc.releaser.release(extra, self._apply(extra))
        await asyncio.sleep(0)  # let the publishes of this step run
        return bool(step.accepted)

    def _reset(self) -> None:
        """Fresh tables in a random phase: betting open, betting closed, part dealt, deciding."""
        rng, svc = self.state_rng, self.svc
        self.since_reset, self.reset_every = 0, rng.randrange(10, 300)
        for tid in svc.configs:  # the service never runs here: the harness puts the tables in
            table = self.Table(svc.configs[tid].rules())
            svc.tables[tid] = table
            self._guard(table)
            self._drive(table, self.ev["open"](round_id=f"{tid}-000001", at=1))
            r = rng.random()
            if r < 0.6:
                continue
            game = table.rules.game
            deciding = game.name == "sevenluck" and r < 0.85
            if deciding:
                for k, p in enumerate(self.players[:3]):
                    self._drive(table, self.ev["bet"](bet_id=f"drv{k}", player_id=p, bet_type="ante", stake="10",
                                                      seat=k + 1, at=2))
            self._drive(table, self.ev["close"](at=3))
            assert table.current is not None
            plan = table.current.plan
            n = len(plan) if deciding else rng.randrange(len(plan))
            for i, code in enumerate(rng.sample(sorted(game.deck), len(plan))[:n]):
                self._drive(table, self.ev["scan"](reader="R", code=code, seq=i + 1, at=4 + i))

    def _guard(self, table: Any) -> None:
        guard_core(table, self._remember)

    def _remember(self, exc: BaseException) -> None:
        self.core_error = exc

    @staticmethod
    def _drive(table: Any, ev: Any) -> None:
        step = table.handle(ev)
        if not step.accepted:
            raise RuntimeError(f"fuzz harness: scenario event {ev.type} refused: {step.rejection}")


class ConfigTarget(Target):
    """``load_settings`` on TOML text: ConfigError with a message, nothing else; and a
    configuration it accepts must build the service's tables (``TableConfig.rules``)."""

    name = "config"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from dealer.edge.config import ConfigError, load_settings

        self.allowed = (ConfigError,)
        self.load = load_settings
        self._tmp = tempfile.TemporaryDirectory(prefix="dealer-fuzz-config-")
        self.path = Path(self._tmp.name) / "dealer.toml"
        self.seeds_text = [encode_text(dump_toml(d)) for d in self.corpus.configs]
        self.strings = self.corpus.strings + ("1979-05-27T07:32:00Z",)

    def close(self) -> None:
        self._tmp.cleanup()

    def generate(self, rng: random.Random) -> bytes:
        r = rng.random()
        if r < 0.08:
            return rng.choice(self.seeds_text)
        if r < 0.75:
            doc = mutate_tree(rng.choice(self.corpus.configs), rng, self.corpus.keys, self.strings)
            if rng.random() < 0.15:  # TOML-only values: dates, bare nan/inf, huge integers
                doc = mutate_tree(doc, rng, self.corpus.keys, ("1979-05-27T07:32:00Z",))
                slots: list[tuple[Any, Any]] = []
                tree_slots(doc, slots)
                if slots:
                    parent, key = rng.choice(slots)
                    parent[key] = Raw(rng.choice(("1979-05-27T07:32:00Z", "07:32:00", "1979-05-27", "nan", "inf",
                                                  "-inf", "+inf", "0x7FFFFFFF", "0o777", "0b101", "1_000",
                                                  "9" * 30, "1e400", "'literal'", "'''x'''", "[]", "{}")))
            return encode_text(dump_toml(doc))[:MAX_INPUT]
        if r < 0.82:
            d = deep(rng)
            return rng.choice((b"a = " + b"[" * d + b"]" * d, b"a = " + b"{b=" * d + b"1" + b"}" * d,
                               b"[" + b".".join([b"a"] * d) + b"]", rng.choice(self.seeds_text) + b"x = " + b"[" * d))
        return mutate_bytes(rng.choice(self.seeds_text), rng, self.seeds_text)

    def check(self, inp: bytes) -> bool:
        self.path.write_bytes(inp)
        settings = self.load(self.path)
        for table in settings.tables:
            try:
                table.rules()
            except Exception as exc:  # noqa: BLE001 - an accepted config whose rules() fail is the finding
                raise Violation(f"load_settings accepted table {table.id!r} whose rules() raise "
                                f"{type(exc).__name__}: {exc}", key=f"rules() raise {type(exc).__name__}") from None
            for name in ("betting_seconds", "decision_seconds"):  # both go through int(seconds * 1000)
                value = getattr(table, name)
                need(math.isfinite(value), f"load_settings accepted {name} = {value!r}: the service computes "
                      f"int({name} * 1000), which raises OverflowError", key=f"non-finite {name} accepted")
        return True
