"""Game recall (``dealer recall``, :mod:`tools.audit`): which rounds a selection names (by round
id, time range and player), and their replay through the same pure core that ran the game, from
a journal given by path or URL or a configuration's; :func:`render_recall` prints them."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dealer.core import round_ids
from dealer.core.events import EVENT_ADAPTER, Event
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, StationPrompt
from dealer.core.round import Rejection, Round, TableRules
from dealer.core.rules import rules_from_canonical
from dealer.games import game_class
from dealer.core.table import Table
from dealer.edge.config import Settings
from dealer.edge.journal import JournalWriteFailed
from dealer.edge.journals import open_read_only, target_of


#: How many rounds ``dealer recall TABLE`` shows when nothing else selects them.
DEFAULT_ROUNDS = 10
#: Journal row types that name the player who sent them (``--player``).
PLAYER_ROWS = ("place_bet", "player_decision", "player_action")
#: A round ends before the next one of its table opens; the events' clocks are stamped where they
#: arrive, so ``--since`` looks this much further back before checking each round's own times.
_CLOCK_SLACK_MS = 60_000


class RecallError(ValueError):
    """What recall cannot do with its input (an unknown round, a bad time, a round whose rules
    were never journaled): said in one line, exit status 2."""


def iso_time(ms: int | None) -> str | None:
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str, option: str = "--since") -> int:
    """An ISO-8601 instant with its zone (``2027-01-15T08:00:00Z``, ``2027-01-15T09:00:00+01:00``)
    as epoch milliseconds. A time without a zone is refused: it would mean another instant on
    another host."""
    example = "e.g. 2027-01-15T08:00:00Z or 2027-01-15T09:00:00+01:00"
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise RecallError(f"{option} {text!r} is not an ISO-8601 time ({example})") from None
    if at.tzinfo is None or at.utcoffset() is None:
        raise RecallError(f"{option} {text!r} has no time zone: add Z for UTC or the offset ({example})")
    return (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


@dataclass(frozen=True)
class Selection:
    """Which rounds recall shows: every selector given must hold (``rounds``: these round ids;
    ``since``/``until``: epoch ms, the round's open..result overlaps them, a round still in play
    ending never; ``player``: the player bet, decided or acted in it), then the last ``last`` of
    them in journal order. Without ``last``: all selected, or the last 10 when nothing selects."""

    rounds: tuple[str, ...] = ()
    since: int | None = None
    until: int | None = None
    player: str | None = None
    last: int | None = None

    @property
    def selective(self) -> bool:
        return bool(self.rounds) or self.since is not None or self.until is not None or self.player is not None

    @property
    def limit(self) -> int | None:
        if self.last is not None:
            return self.last
        return None if self.selective else DEFAULT_ROUNDS


@dataclass
class Replayed:
    """One recalled round: its JSON-able ``record`` (what ``dealer recall --json`` prints), the
    core's :class:`Round` as the replay left it (every card, hole cards included), the rules it
    was played under, and each of its journal rows with the event and the core's effects."""

    record: dict[str, Any]
    round: Round | None
    rules: TableRules
    steps: list[tuple[Any, Event, list[Any]]] = field(default_factory=list)
    open_row: int = 0

    @property
    def result(self) -> RoundResult | None:
        res = self.record.get("result")
        return RoundResult.model_validate(res) if res is not None else None


@dataclass
class _Open:
    """An ``open_round`` row, as the index pass sees it."""

    row_id: int
    round_id: str
    at: int
    next_at: int | None = None
    players: set[str] = field(default_factory=set)


def _effect(e: Any) -> dict[str, Any]:
    if isinstance(e, RoundEvent):
        return {"event": e.event, **e.data}
    if isinstance(e, StationPrompt):
        return {"prompt": e.kind, "message": e.message}
    if isinstance(e, PlayerMessage):  # hole cards are shown to the auditor, marked private
        return {"private_to": e.player_id, "kind": e.kind, **e.data}
    if isinstance(e, RoundResult):
        return {"result": e.outcome, "idempotency_key": e.idempotency_key, "winner": e.winner,
                "reason": e.reason, "dealers": list(e.dealers)}
    if isinstance(e, Rejection):
        return {"rejected": e.reason}
    return {"effect": type(e).__name__}


# --- which rounds -------------------------------------------------------------------------------


def tables_of_round(round_id: str) -> list[str]:
    """The tables a round id may belong to, most likely first: ``{table}-{series}-{seq}`` (the
    form every journal with an id writes) before ``{table}-{seq}`` (older journals). A table id
    may itself hold a ``-``, so the journal decides (:meth:`_Index.table_of`)."""
    parts = round_id.split("-")
    return [t for t in ("-".join(parts[:i]) for i in range(1, len(parts))) if round_ids.parse(round_id, t)]


class _Index:
    """Each table's rounds (their ``open_round`` rows), read once per table from a journal."""

    def __init__(self, journal: Any) -> None:
        self.journal = journal
        self._tables: dict[str, list[_Open]] = {}

    def opens(self, table_id: str) -> list[_Open]:
        if table_id not in self._tables:
            opens: list[_Open] = []
            by_round: dict[str, _Open] = {}
            for row in self.journal.rows(table_id):
                if row.type == "open_round":
                    body = _body(row)
                    o = _Open(row.id, str(body.get("round_id") or row.round_id), int(body.get("at") or 0))
                    if opens:
                        opens[-1].next_at = o.at
                    opens.append(o)
                    by_round[o.round_id] = o
                elif row.type in PLAYER_ROWS and opens:
                    player = _body(row).get("player_id")
                    target = by_round.get(row.round_id or "", opens[-1])
                    if isinstance(player, str):
                        target.players.add(player)
            self._tables[table_id] = opens
        return self._tables[table_id]

    def table_of(self, round_id: str) -> str:
        for table_id in tables_of_round(round_id):
            if any(o.round_id == round_id for o in self.opens(table_id)):
                return table_id
        raise RecallError(f"no round {round_id} in journal {self.journal.path}")


def _body(row: Any) -> dict[str, Any]:
    try:
        body = json.loads(row.body)
    except ValueError:
        raise RecallError(f"journal row {row.id} is not valid JSON") from None
    return body if isinstance(body, dict) else {}


def select_rounds(journal: Any, table_id: str | None, selection: Selection,
                  base_rules: Callable[[str], TableRules | None] = lambda _t: None) -> list[Replayed]:
    """The rounds ``selection`` picks from an open journal (of ``table_id``; without it, of the
    tables the ``--round`` ids name), in journal order, each replayed through the pure core.

    A round is replayed under the ``table_rules`` journaled before it (then every later one as
    it comes), exactly as the service replays it; ``base_rules(table)`` (a configuration's) is
    used only for a journal older than rules events, and without it such a round is a
    :class:`RecallError` (its rules are unknown)."""
    index = _Index(journal)
    wanted_ids = list(dict.fromkeys(selection.rounds))
    if table_id is not None:
        foreign = [r for r in wanted_ids if round_ids.parse(r, table_id) is None]
        if foreign:
            raise RecallError(f"round {foreign[0]} is not a round of table {table_id}")
        tables = [table_id]
    elif wanted_ids:
        tables = list(dict.fromkeys(index.table_of(r) for r in wanted_ids))
    else:
        raise RecallError("say which rounds: give TABLE, or --round ROUND_ID")
    if selection.since is not None and selection.until is not None and selection.since > selection.until:
        raise RecallError(f"--since {iso_time(selection.since)} is after --until {iso_time(selection.until)}")
    out: list[Replayed] = []
    for tid in tables:
        opens = index.opens(tid)
        if table_id is not None:  # without TABLE, table_of found each round already
            missing = [r for r in wanted_ids if r not in {o.round_id for o in opens}]
            if missing:
                raise RecallError(f"no round {missing[0]} in journal {journal.path}")
        if not opens:
            if base_rules(tid) is None:
                raise RecallError(f"journal {journal.path} has no round of table {tid}")
            continue
        cands = opens
        if wanted_ids:
            cands = [o for o in cands if o.round_id in wanted_ids]
        if selection.player is not None:
            cands = [o for o in cands if selection.player in o.players]
        if selection.until is not None:
            cands = [o for o in cands if o.at <= selection.until]
        if selection.since is not None:
            cands = [o for o in cands if o.next_at is None or o.next_at + _CLOCK_SLACK_MS >= selection.since]
        timed = selection.since is not None or selection.until is not None
        if selection.limit is not None and not timed:
            cands = cands[-selection.limit:]
        if not cands:
            continue
        replayed = _replay(journal, tid, cands, base_rules(tid))
        out += [r for r in replayed if not timed or _overlaps(r, selection)]
    out.sort(key=lambda r: r.open_row)
    return out[-selection.limit:] if selection.limit is not None else out


def _overlaps(rep: Replayed, sel: Selection) -> bool:
    res = rep.record.get("result") or {}
    opened = int(res.get("opened_at") or rep.record["opened_at"])
    ended = res.get("finished_at")  # None: still in play (or its result never came): open-ended
    if sel.until is not None and opened > sel.until:
        return False
    return sel.since is None or ended is None or int(ended) >= sel.since


def _table_at(journal: Any, table_id: str, row_id: int, base: TableRules | None, round_id: str) -> tuple[Table, str]:
    """A table rebuilt to replay from the ``open_round`` at ``row_id``, under the rules in force there."""
    series = journal.journal_id or None
    before = journal.rules_before(table_id, row_id)
    if before is None:
        if base is None:
            raise RecallError(f"journal {journal.path} has no table_rules event for table {table_id} before round "
                              f"{round_id}: the rules it was played with are unknown; give --config FILE to replay it "
                              "under the configuration's rules")
        return Table(base, series=series), "configuration (no table_rules event journaled before this round)"
    ev = EVENT_ADAPTER.validate_json(before.body)
    rules = rules_from_canonical(table_id, ev.rules, ev.software_version, games=game_class)  # type: ignore[union-attr]  # the event before a round is its table_rules event (RulesChanged)
    table = Table(rules, series=series)
    table.handle(ev)
    return table, f"journal row {before.id}"


def _replay(journal: Any, table_id: str, wanted: list[_Open], base: TableRules | None) -> list[Replayed]:
    """Replay ``wanted`` (in journal order) through the pure core. The table is rebuilt at a
    wanted round's ``open_round`` (as the service rebuilds it at its replay start) and replays
    on from there; once every wanted round so far has its result delivered, the rounds up to
    the next wanted one are skipped."""
    ids = {o.round_id for o in wanted}
    out: dict[str, Replayed] = {}
    table: Table | None = None
    source = ""
    for row in journal.rows(table_id, since_id=wanted[0].row_id):
        if row.type == "open_round":
            if table is not None and row.round_id not in ids and _settled(table, out):
                if len(out) == len(ids):
                    break
                table = None
            if table is None:
                if row.round_id not in ids:
                    continue
                table, source = _table_at(journal, table_id, row.id, base, row.round_id)
        elif table is None:
            continue
        ev = EVENT_ADAPTER.validate_json(row.body)
        if ev.type == "table_rules":
            source = f"journal row {row.id}"
        step = table.handle(ev)
        rid = row.round_id or (table.current.round_id if table.current else None)
        if rid not in ids:
            continue
        if rid not in out:
            cur = table.current if table.current is not None and table.current.round_id == rid else None
            played = cur.rules if cur is not None else table.rules
            out[rid] = Replayed(
                {"round_id": rid, "table_id": table_id, "game": played.game.name, "events": [],
                 "dealers": list(cur.dealers) if cur is not None else [],
                 "opened_at": cur.opened_at if cur is not None else ev.at,
                 "journal": {"id": journal.journal_id, "path": journal.path},
                 "rules": {"hash": played.rules_hash, "software_version": played.software_version,
                           "source": source, "canonical": json.loads(played.canonical) if played.canonical else None}},
                cur, played, open_row=row.id)
        rep = out[rid]
        rep.steps.append((row, ev, list(step.effects)))
        rows = rep.record.setdefault("rows", {"first": row.id})
        rows.update(last=row.id, last_hash=row.hash)
        fields = {k: v for k, v in ev.model_dump(mode="json").items() if k not in ("type", "at")}
        rep.record["events"].append({
            "journal_id": row.id, "type": ev.type, "received_at": iso_time(ev.at), "recorded_at": iso_time(row.recorded_at),
            **fields, "effects": [_effect(e) for e in step.effects],
        })
        res = next((e for e in step.effects if isinstance(e, RoundResult)), None)
        if res is not None:
            rep.record["result"] = json.loads(res.model_dump_json())
    return [out[o.round_id] for o in wanted if o.round_id in out]


def _settled(table: Table, out: dict[str, Replayed]) -> bool:
    """Every wanted round replayed so far has its result, and settlement acknowledged it (so
    no later row belongs to it)."""
    return all("result" in r.record and rid not in table.undelivered for rid, r in out.items())


@contextlib.contextmanager
def reading(target: str | Path) -> Iterator[Any]:
    """The journal at ``target`` opened read-only (never created), closed after; damage or a
    database gone while reading becomes a :class:`RecallError` (one line)."""
    journal = open_read_only(target)  # JournalError (a ValueError): missing, not a journal, unreachable
    try:
        yield journal
    except sqlite3.DatabaseError as exc:  # damage that only reading the rows reaches
        raise RecallError(f"the journal cannot be read: {exc}") from None
    except JournalWriteFailed as exc:  # the journal's database went away while reading
        raise RecallError(f"the journal cannot be read: {' '.join(str(exc).split())}") from None
    finally:
        journal.close()


def recall(settings: Settings, table_id: str, rounds: int = 10,
           selection: Selection | None = None) -> list[dict[str, Any]]:
    """The last ``rounds`` rounds of a configured table (or those ``selection`` picks), each
    with every journaled event and its effects, from the configuration's journal.

    Each round names the rules it was played under: their hash, software version, canonical
    form and where they came from (the journal's ``table_rules`` row; the configuration only
    for a journal older than rules events)."""
    cfg = next((t for t in settings.tables if t.id == table_id), None)
    if cfg is None:
        raise ValueError(f"table {table_id!r} is not in this configuration ({[t.id for t in settings.tables]})")
    with reading(target_of(settings)) as journal:
        rules = cfg.rules()
        picked = select_rounds(journal, table_id, selection or Selection(last=rounds),
                               lambda t: rules if t == table_id else None)
        return [r.record for r in picked]


def recall_journal(target: str | Path, table_id: str | None, selection: Selection,
                   settings: Settings | None = None) -> list[Replayed]:
    """The rounds ``selection`` picks from the journal at ``target`` (a file or a postgresql://
    URL, read-only). ``settings`` (optional) gives the rules of a configured table for rounds
    journaled before rules events; without it those rounds are refused."""
    configured = {t.id: t for t in settings.tables} if settings is not None else {}

    def base(tid: str) -> TableRules | None:
        return configured[tid].rules() if tid in configured else None

    with reading(target) as journal:
        return select_rounds(journal, table_id, selection, base)


def render_recall(rounds: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    if rounds and rounds[0].get("journal"):  # the series in every round id and idempotency key
        lines.append(f"journal {rounds[0]['journal']['path']}  id {rounds[0]['journal']['id']}")
    for rnd in rounds:
        res = rnd.get("result") or {}
        lines.append(f"=== {rnd['round_id']} ({rnd['game']})  outcome: {res.get('outcome', 'in play')}"
                     + (f"  reason: {res['reason']}" if res.get("reason") else "")
                     + f"  dealt by: {', '.join(res.get('dealers') or rnd.get('dealers') or []) or '(nobody logged on)'}")
        rules = rnd.get("rules")
        if rules:
            lines.append(f"  rules {rules['hash']}  software {rules['software_version'] or '(unknown)'}  "
                         f"from {rules['source']}")
        for ev in rnd["events"]:
            detail = {k: v for k, v in ev.items()
                      if k not in ("journal_id", "type", "received_at", "recorded_at", "effects") and v is not None}
            effects = "; ".join(_short(e) for e in ev["effects"] if _short(e))
            lines.append(f"  #{ev['journal_id']:<6} {ev['received_at']}  {ev['type']:<17} "
                         f"{json.dumps(detail, sort_keys=True) if detail else ''}")
            if effects:
                lines.append(f"  {'':7} -> {effects}")
    return "\n".join(lines)


def _short(e: dict[str, Any]) -> str:
    if "prompt" in e:
        return str(e["message"]) if e["prompt"] in ("RESCAN", "ALERT", "DONE", "PAUSED", "CLOSED") else ""
    if "event" in e:
        if e["event"] == "card_registered":
            return f"card {e['position']}={e.get('card') or '(face down)'}"
        if e["event"] in ("round_result", "round_cancelled", "round_voided", "decision_made", "cards_revealed",
                          "dealer_logged_on",
                          "bet_accepted", "bet_rejected", "betting_closed", "rules_changed", "table_paused",
                          "table_resumed", "table_closing", "table_closed", "table_reopened", "betting_resumed",
                          "card_burned"):
            return e["event"] + " " + json.dumps({k: v for k, v in e.items() if k != "event"}, sort_keys=True)
        if e["event"] == "round_opened" and e.get("opened_by"):
            return e["event"] + " " + json.dumps({k: v for k, v in e.items() if k != "event"}, sort_keys=True)
        return ""
    if "private_to" in e:
        return f"(private to {e['private_to']}: {e['kind']} {e.get('position', '')}={e.get('card', '')})" \
            if e["kind"] == "hole_card" else ""
    if "rejected" in e:
        return f"REJECTED: {e['rejected']}"
    if "result" in e:
        return f"RESULT {e['result']} key={e['idempotency_key']}"
    return ""
