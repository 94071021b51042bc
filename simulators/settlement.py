"""Reference settlement consumer: random bets in, exactly-once payouts out, a SQLite ledger.

It plays the part of the systems that pay players. It settles the bets of its **bet book**
(the ledger's ``bets`` table, written by the player platform before it sends each bet: here a
:class:`simulators.bettors.Bettor`, in this process with ``place_bets`` or in another one
sharing the ledger file, as ``dealer simulate --ledger`` does). When a round's result
arrives it applies it **once** per idempotency key (a second delivery is counted and
ignored) using :func:`dealer.core.settlement.settle_bet`, so payouts and refunds are computed
exactly as any consumer would, and reconciles its bets with the result's ``accepted_bets``
summary. ``dealer settle`` runs it as a service.

The ledger is durable (SQLite, WAL): a result is applied in one transaction, and only after
that commit is it acknowledged on ``results/ack`` with its idempotency key and the SHA-256 of
the exact bytes that were applied (``result_sha256``; the manifest's, for a result in parts), so
the backend keeps (and re-sends) a result until it is on this ledger. A redelivery of a result
already applied is acknowledged again, with the hash of what was applied: the first
acknowledgement may be the one that was lost. A redelivery under an applied key with other
bytes is a reconciliation mismatch (the acknowledgement names the applied bytes, so the backend
refuses it and keeps the other result for a person to look at). A message that
is not a valid result is counted and logged, and changes nothing; a ledger that cannot be
written (a full disk) applies nothing and acknowledges nothing, so the backend sends the
result again later.

A result too big for one message comes as a manifest (``accepted_bets.parts = n``) and n
:class:`~dealer.core.messages.RoundResultPart` messages, in any order and possibly more than once.
Each is buffered durably in the ledger (tables ``manifests`` and ``parts``) as it arrives; the
result is applied, and its buffer emptied, in one transaction once the manifest and every part
are there and the digest of the joined bet ids matches the manifest's (then acknowledged). A
mismatch is recorded in :attr:`SettlementConsumer.mismatches`, nothing is applied and nothing
is acknowledged.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import structlog
from pydantic import ValidationError

from dealer.core.acks import result_sha256
from dealer.edge import topics
from dealer.core.messages import RoundEvent, RoundResult, RoundResultPart
from dealer.core.result_parts import join_parts
from dealer.core.settlement import settle_bet
from drivers.bus import Bus, BusError
from simulators.feed import events_of
from simulators.bettors import DEFAULT_STAKES, BetPlan, Bettor, random_bets
from simulators.game_players import DEFAULT_BET_TYPES, DEFAULT_GAME

log = structlog.get_logger("simulators.settlement")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS applied (key TEXT PRIMARY KEY, outcome TEXT NOT NULL, result TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bets (bet_id TEXT PRIMARY KEY, round_id TEXT NOT NULL, player_id TEXT NOT NULL,
                                 bet_type TEXT NOT NULL, stake TEXT NOT NULL, seat INTEGER);
CREATE TABLE IF NOT EXISTS ledger (bet_id TEXT PRIMARY KEY, key TEXT NOT NULL, player_id TEXT NOT NULL,
                                   bet_type TEXT NOT NULL, stake TEXT NOT NULL, outcome TEXT NOT NULL,
                                   returned TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS manifests (key TEXT PRIMARY KEY, parts INTEGER NOT NULL, result TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS parts (key TEXT NOT NULL, parts INTEGER NOT NULL, part INTEGER NOT NULL,
                                  body TEXT NOT NULL, PRIMARY KEY (key, parts, part));
"""


def open_ledger(path: str | Path) -> sqlite3.Connection:
    """The ledger at ``path`` (created if missing): WAL, autocommit outside explicit
    transactions, waiting up to 10 s for another process's write (a bettor sharing the bet
    book). sqlite3.Error when it cannot be opened."""
    db = sqlite3.connect(str(path), isolation_level=None, timeout=10)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(_SCHEMA)
    except sqlite3.Error:
        db.close()
        raise
    return db


def remove_ledger(path: str | Path) -> None:
    """Remove a ledger file (and its WAL files): one this process just created, when its start
    is refused."""
    p = Path(path)
    for f in (p, p.with_name(p.name + "-wal"), p.with_name(p.name + "-shm")):
        f.unlink(missing_ok=True)


@dataclass(frozen=True, slots=True)
class Payout:
    key: str
    bet_id: str
    player_id: str
    bet_type: str
    stake: Decimal
    outcome: str
    returned: Decimal


@dataclass
class SettlementConsumer:
    bus: Bus
    table_ids: list[str]
    ledger_path: str | Path
    rng: random.Random = field(default_factory=random.Random)
    players: int = 3
    bet_types: tuple[str, ...] = DEFAULT_BET_TYPES
    stakes: tuple[str, ...] = DEFAULT_STAKES
    place_bets: bool = True  # also play the player platform: random bets in every round (one process)
    game: str = DEFAULT_GAME
    plan: BetPlan | None = None  # what the bets are (default: from game, players, bet_types, stakes)
    on_payout: Callable[[RoundResult, list[Payout]], None] | None = None
    acknowledge: bool = True  # False: a settlement that applies results but never says so (tests)
    #: called with one JSON-able dict per thing done: result_applied, result_repeat,
    #: reconciliation_mismatch, bad_message, not_applied (``dealer settle`` prints them)
    report: Callable[[dict[str, Any]], None] | None = None

    def __post_init__(self) -> None:
        self.db = open_ledger(self.ledger_path)
        self.duplicates = 0
        self.bad_messages = 0
        self.ledger_errors = 0
        self.duplicate_parts = 0
        self.mismatches: list[str] = []
        self.results_seen = 0
        self.acks_sent = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._bet_seq = 0
        self._bettor: Bettor | None = None
        self._opened: set[tuple[str, str | None]] = set()
        for tid in self.table_ids:
            if self.place_bets:  # settlement itself reads only results (its broker ACL)
                self.bus.subscribe(topics.state(tid), events_of(self._on_event))
            self.bus.subscribe(topics.results(tid), self._on_result)

    # -- bets -------------------------------------------------------------------------

    def _on_event(self, topic: str, payload: bytes) -> None:
        try:
            ev = RoundEvent.model_validate_json(payload)
        except ValueError:
            return  # not an event: nothing to bet on
        if ev.event == "round_opened" and self.place_bets and (ev.table_id, ev.round_id) not in self._opened:
            self._opened.add((ev.table_id, ev.round_id))  # a redelivered opening must not bet twice
            self._place_random_bets(ev.table_id, str(ev.round_id))

    def _bet_plan(self, table_id: str) -> BetPlan:
        return self.plan or BetPlan(self.game, self.players, self.bet_types, self.stakes)

    def _random_bets(self) -> list[tuple[str, str, int | None, str]]:
        """(player, bet type, seat, stake) for one round (:func:`simulators.bettors.random_bets`)."""
        return random_bets(self._bet_plan(""), self.rng)

    def _place_random_bets(self, table_id: str, round_id: str) -> None:
        if self._bettor is None:
            self._bettor = Bettor(self.bus, self.db, self._bet_plan, self.rng, subscribe=False)
        self._bettor.place(table_id, round_id)

    async def _send(self, topic: str, payload: bytes) -> None:
        try:
            await self.bus.publish(topic, payload, qos=1)
        except BusError as exc:
            log.info("not sent", topic=topic, reason=str(exc))

    # -- results ----------------------------------------------------------------------

    def _on_result(self, topic: str, payload: bytes) -> None:
        """One delivery on a ``results`` topic. Bad input changes nothing (counted, logged);
        a ledger that cannot be written applies and acknowledges nothing (sent again later)."""
        try:
            msg = json.loads(payload.decode("utf-8"))
            if not isinstance(msg, dict):
                raise ValueError("not a JSON object")
            if msg.get("schema_id") == "studio.v1.round_result_part":
                parsed: RoundResult | RoundResultPart = RoundResultPart.model_validate(msg)
            else:
                parsed = RoundResult.model_validate(msg)
        except (ValueError, ValidationError) as exc:  # ValidationError: a ValueError, named for clarity
            self.bad_messages += 1
            log.warning("bad result message ignored", topic=topic, bytes=len(payload),
                        reason=_reason(exc))
            self._report("bad_message", topic=topic, reason=_reason(exc))
            return
        if isinstance(parsed, RoundResultPart):
            self._on_part(parsed, payload)
            return
        result = parsed
        try:
            self._on_whole(result, payload)
        except (sqlite3.Error, ValueError) as exc:  # ValueError: a bet settle_bet cannot settle
            self.ledger_errors += 1
            log.error("result not applied, not acknowledged (the backend sends it again)",
                      key=result.idempotency_key, reason=_reason(exc))
            self._report("not_applied", idempotency_key=result.idempotency_key, reason=_reason(exc))

    def _on_whole(self, result: RoundResult, payload: bytes) -> None:
        self.results_seen += 1
        if result.accepted_bets.parts == 0:
            self._settle(result, payload.decode())
            return
        with self._tx():
            before = self._applied(result.idempotency_key)
            if not before:
                self.db.execute("INSERT OR IGNORE INTO manifests VALUES (?, ?, ?)",
                                (result.idempotency_key, result.accepted_bets.parts, payload.decode()))
        if before:  # delivered again: applied already, acknowledged again
            self.duplicates += 1
            self._check_repeat(result.idempotency_key, payload.decode())
            self._acknowledge(result.table_id, result.idempotency_key, result.round_id)
            self._report("result_repeat", idempotency_key=result.idempotency_key, acknowledged=self.acknowledge)
            return
        self._try_join(result.idempotency_key)

    def _on_part(self, part: RoundResultPart, payload: bytes) -> None:
        try:
            self._on_part_tx(part, payload)
        except (sqlite3.Error, ValueError) as exc:
            self.ledger_errors += 1
            log.error("ledger write failed: part not buffered", key=part.idempotency_key, part=part.part,
                      reason=str(exc))

    def _on_part_tx(self, part: RoundResultPart, payload: bytes) -> None:
        with self._tx():
            before = self._applied(part.idempotency_key)
            cur = None if before else self.db.execute("INSERT OR IGNORE INTO parts VALUES (?, ?, ?, ?)",
                                                      (part.idempotency_key, part.parts, part.part, payload.decode()))
        if before:  # a part of a result applied already: acknowledged again
            self.duplicate_parts += 1
            self._acknowledge(part.table_id, part.idempotency_key, part.round_id)
            return
        if cur is not None and cur.rowcount == 0:
            self.duplicate_parts += 1
            return
        self._try_join(part.idempotency_key)

    @contextmanager
    def _tx(self) -> Iterator[None]:
        """One transaction (the connection autocommits otherwise: ``with db`` alone would not)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _applied(self, key: str) -> bool:
        return self.db.execute("SELECT 1 FROM applied WHERE key = ?", (key,)).fetchone() is not None

    def _try_join(self, key: str) -> None:
        """Apply a result in parts once its manifest and all its parts are buffered."""
        row = self.db.execute("SELECT parts, result FROM manifests WHERE key = ?", (key,)).fetchone()
        if row is None:
            return
        n, text = int(row[0]), str(row[1])
        bodies = [b for (b,) in self.db.execute("SELECT body FROM parts WHERE key = ? AND parts = ? ORDER BY part",
                                                (key, n))]
        if len(bodies) < n:
            return
        manifest = RoundResult.model_validate_json(text)
        try:
            result = join_parts(manifest, [RoundResultPart.model_validate_json(b) for b in bodies])
        except ValueError as exc:
            self.mismatches.append(f"{key}: result in parts not applied: {exc}")
            log.warning("result in parts refused", key=key, reason=str(exc))
            self._report("reconciliation_mismatch", idempotency_key=key, detail=f"result in parts not applied: {exc}")
            return
        self._settle(result, text, done_parts=key)  # ``applied`` keeps what was delivered: the manifest

    def _settle(self, result: RoundResult, text: str, done_parts: str | None = None) -> None:
        """Apply one whole result once per idempotency key, in one transaction (with the removal
        of its buffered parts), then acknowledge it; a repeat is acknowledged again."""
        with self._tx():  # the whole result, or nothing of it
            if done_parts is not None:
                self.db.execute("DELETE FROM manifests WHERE key = ?", (done_parts,))
                self.db.execute("DELETE FROM parts WHERE key = ?", (done_parts,))
            applied = self._apply(result, text)
        self._acknowledge(result.table_id, result.idempotency_key, result.round_id)  # only now: it is on the ledger
        if applied is None:
            self.duplicates += 1  # delivered again (at-least-once): already applied, acknowledged again
            self._check_repeat(result.idempotency_key, text)
            self._report("result_repeat", idempotency_key=result.idempotency_key, acknowledged=self.acknowledge)
            return
        payouts, unknown = applied
        self._report("result_applied", idempotency_key=result.idempotency_key, table_id=result.table_id,
                     round_id=result.round_id, outcome=result.outcome, bets=len(payouts),
                     staked=str(sum((p.stake for p in payouts), Decimal(0))),
                     returned=str(sum((p.returned for p in payouts), Decimal(0))),
                     currency=result.money.currency, acknowledged=self.acknowledge)
        self._reconcile(result, [p for p in payouts if p.outcome != "NOT_ACCEPTED" and p.bet_type != "play"], unknown)
        if self.on_payout is not None:
            self.on_payout(result, payouts)

    async def drain(self, timeout: float = 2.0) -> None:
        """Wait (up to ``timeout``) for the acknowledgements in flight to reach the broker."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    def _check_repeat(self, key: str, text: str) -> None:
        """A key applied before came again: with other bytes, it is not the result that was
        applied (a backend that reused a key): a mismatch for a person, never applied."""
        row = self.db.execute("SELECT result FROM applied WHERE key = ?", (key,)).fetchone()
        if row is not None and str(row[0]) != text:
            msg = f"{key}: delivered again with other content than the result applied under this key"
            self.mismatches.append(msg)
            log.warning("reconciliation mismatch", detail=msg)
            self._report("reconciliation_mismatch", idempotency_key=key, detail=msg)

    def _acknowledge(self, table_id: str, key: str, round_id: str) -> None:
        """Say on ``results/ack`` that the result under ``key`` is on the ledger: its key and the
        SHA-256 of the bytes applied (what the backend checks against the result it holds)."""
        if not self.acknowledge:
            return
        row = self.db.execute("SELECT result FROM applied WHERE key = ?", (key,)).fetchone()
        if row is None:  # never: called once the result is applied
            log.error("not acknowledged: the result is not on the ledger", key=key)
            return
        ack = json.dumps({"idempotency_key": key, "result_sha256": result_sha256(str(row[0]).encode()),
                          "round_id": round_id}).encode()
        task = asyncio.get_running_loop().create_task(self._send(topics.results_ack(table_id), ack))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self.acks_sent += 1

    def _apply(self, result: RoundResult, text: str) -> tuple[list[Payout], set[str]] | None:
        """Write one result to the ledger (inside the caller's transaction); None when its key
        was applied before."""
        cur = self.db.execute("INSERT OR IGNORE INTO applied VALUES (?, ?, ?)",
                              (result.idempotency_key, result.outcome, text))
        if cur.rowcount == 0:
            return None
        rows = self.db.execute("SELECT bet_id, player_id, bet_type, stake FROM bets WHERE round_id = ?",
                               (result.round_id,)).fetchall()
        accepted = set(result.accepted_bets.bet_ids)
        payouts = []
        lines = [(b, p, t, st) for b, p, t, st in rows]
        for player, decision in result.decisions.items():  # a PLAY decision created a Play bet
            ante = next((b for b, p, t, _ in rows if p == player and t == "ante" and b in accepted), None)
            if decision.play_stake is not None and ante is not None:
                lines.append((f"{ante}:play", player, "play", str(decision.play_stake)))
                accepted.add(f"{ante}:play")
        for bet_id, player, bet_type, stake in lines:
            if bet_id in accepted:
                s = settle_bet(bet_type, stake, result, player)
                outcome, returned = s.outcome, s.returned
            else:  # never accepted (sent too late, refused, or lost): the stake was never at risk
                outcome, returned = "NOT_ACCEPTED", Decimal(stake)
            payouts.append(Payout(result.idempotency_key, bet_id, player, bet_type, Decimal(stake), outcome, returned))
            self.db.execute("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (bet_id, result.idempotency_key, player, bet_type, stake, outcome, str(returned)))
        unknown = accepted - {line[0] for line in lines}
        return payouts, unknown

    def _reconcile(self, result: RoundResult, settled: list[Payout], unknown: set[str]) -> None:
        mine: dict[str, Decimal] = {}
        for p in settled:
            mine[p.bet_type] = mine.get(p.bet_type, Decimal(0)) + p.stake
        if unknown or mine != dict(result.accepted_bets.stakes):
            msg = (f"{result.idempotency_key}: backend accepted bets this ledger does not hold {sorted(unknown)}, "
                   f"or stakes differ: ledger {mine} vs backend {dict(result.accepted_bets.stakes)}")
            self.mismatches.append(msg)
            log.warning("reconciliation mismatch", detail=msg)
            self._report("reconciliation_mismatch", idempotency_key=result.idempotency_key, detail=msg,
                         unknown_bets=sorted(unknown)[:20])

    def _report(self, event: str, **fields: Any) -> None:
        if self.report is not None:
            self.report({"event": event, **fields})

    # -- reporting --------------------------------------------------------------------

    def applied_keys(self) -> list[str]:
        return [k for (k,) in self.db.execute("SELECT key FROM applied ORDER BY rowid")]

    def balances(self) -> dict[str, Decimal]:
        """Net result per player (returned minus staked) over every settled bet."""
        out: dict[str, Decimal] = {}
        for player, stake, returned in self.db.execute("SELECT player_id, stake, returned FROM ledger"):
            out[player] = out.get(player, Decimal(0)) + Decimal(returned) - Decimal(stake)
        return dict(sorted(out.items()))

    def applied_result(self, key: str) -> dict | None:
        row = self.db.execute("SELECT result FROM applied WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def close(self) -> None:
        self.db.close()


def _reason(exc: Exception) -> str:
    """One line, without pydantic's documentation links or the input echoed back."""
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(x) for x in e['loc']) or 'message'}: {e['msg']}"
                         for e in exc.errors(include_url=False, include_input=False))[:500]
    return " ".join(str(exc).split())[:500]
