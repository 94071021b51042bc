"""Game recall, disputes and journal audit for supervisors and regulators.

``dealer recall`` replays a table's journal through the same pure core that ran the game, so
what it shows is exactly what the backend decided: every read (with the reader's sequence
number and the receive time), every rescan and its reason, every prompt, bet, decision, void
reason and result, from the segment files rolled out of the journal (dealer/edge/segments.py)
on. A supervisor's table operation (open a round, pause, resume, close, reopen: signed, with the
supervisor's id and signature) is shown in the round that was in play, or last played, when it
was applied. Rounds are chosen by round id, time range and player (:class:`Selection`), from a
journal given by path or URL (``--journal``, read-only) or a configuration's; without a
configuration a table's rules come from the journal's own ``table_rules`` events.

``dealer recall --round ID --report`` prints the round's dispute report (:func:`dispute_report`,
:func:`render_report`), and ``dealer hand --round ID`` re-evaluates the round's hands with the
game's hand report under the rules it was played with (:func:`hand_for_round`).

``dealer audit verify`` walks the hash chain across every segment and the live journal, checks
each segment file against its record and every anchor, and reports the first row (and segment)
that does not hold.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from dealer.core import round_ids
from dealer.core.events import EVENT_ADAPTER, Event
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, RoundResultPart, StationPrompt
from dealer.core.round import Rejection, Round, TableRules
from dealer.core.rules import rules_from_canonical, software_version
from dealer.games import game_class
from dealer.core.table import Table
from dealer.edge.config import ConfigError, Settings, load_settings
from dealer.edge.journal import JournalError, JournalWriteFailed
from dealer.edge.journals import audit_verify, is_url, open_read_only, target_of
from dealer.edge.segments import parse_anchor

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


def _iso(ms: int | None) -> str | None:
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
        raise RecallError(f"--since {_iso(selection.since)} is after --until {_iso(selection.until)}")
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
    rules = rules_from_canonical(table_id, ev.rules, ev.software_version, games=game_class)  # type: ignore[union-attr]
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
            "journal_id": row.id, "type": ev.type, "received_at": _iso(ev.at), "recorded_at": _iso(row.recorded_at),
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
def _reading(target: str | Path) -> Iterator[Any]:
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
    with _reading(target_of(settings)) as journal:
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

    with _reading(target) as journal:
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


# --- the dispute report -------------------------------------------------------------------------

#: Journal rows that are a supervisor's act (signed on the wire) or a refused one (security).
_SUPERVISOR_ROWS = {"supervisor_void": "void", "supervisor_pause": "pause", "supervisor_resume": "resume",
                    "supervisor_close": "close", "supervisor_reopen": "reopen", "supervisor_expose": "expose",
                    "security_event": "refused command"}
#: Journal rows that are a player's decision or action, or the timer's in the player's place.
_PLAY_ROWS = ("player_decision", "decision_timeout", "player_action", "action_timeout")
#: The core's notes of a decision or action carried out.
_PLAY_NOTES = ("decision_made", "player_acted", "reservation_executed")


def _refusal(effects: list[Any]) -> str | None:
    return next((e.reason for e in effects if isinstance(e, Rejection)), None)


def _times(row: Any, ev: Event) -> dict[str, Any]:
    return {"row": row.id, "received_at": _iso(ev.at), "recorded_at": _iso(row.recorded_at)}


def dispute_report(rep: Replayed) -> dict[str, Any]:
    """One round's dispute report as data (:func:`render_report` prints it): who dealt, every
    read and rescan, every card (hole cards marked private), bet, decision and action, every
    supervisor act, the result with each bet's payout, and the void. Built from the replay of
    the journal (:func:`select_rounds`), hole cards included: it is an auditor's document."""
    rec, rnd = rep.record, rep.round
    res = rep.result
    report: dict[str, Any] = {
        "round_id": rec["round_id"], "table_id": rec["table_id"], "game": rec["game"],
        "rules": {k: rec["rules"][k] for k in ("hash", "software_version", "source")},
        "journal": {**rec["journal"], "rows": rec.get("rows")},
        "made": {"at": _iso(_now_ms()), "by": f"dealer {software_version()}"},
        "dealers": list(res.dealers if res is not None else rec.get("dealers") or []),
        "opened": None, "logons": [], "reads": [], "rescans": [], "cards": [], "bets": [], "plays": [],
        "supervisor": [], "result": None, "void": None,
    }
    private: dict[str, str | None] = {}  # position -> the player it is private to (None: nobody's, e.g. a burn)
    for row, event, effects in rep.steps:
        ev: Any = event  # each branch reads its own event type's fields
        refused = _refusal(effects)
        notes = [e for e in effects if isinstance(e, RoundEvent)]
        if ev.type == "open_round":
            report["opened"] = {**_times(row, ev), "by": ev.supervisor, "signature": ev.signature is not None,
                                "reason": ev.reason, "dealer": ev.dealer}
            if ev.supervisor is not None:
                report["supervisor"].append({**_times(row, ev), "act": "open round", "supervisor": ev.supervisor,
                                             "signature": ev.signature is not None,
                                             "issued_at": _iso(ev.issued_at), "reason": ev.reason,
                                             "applied": refused is None, "refusal": refused})
        elif ev.type == "dealer_logon":
            report["logons"].append({**_times(row, ev), "dealer": ev.dealer_id, "applied": refused is None,
                                     "refusal": refused})
        elif ev.type in ("scan_read", "read_failed"):
            card = next((n for n in notes if n.event == "card_registered"), None)
            bad = next((n for n in notes if n.event == "scan_rejected"), None)
            burned = next((n for n in notes if n.event == "card_burned"), None)
            report["reads"].append({
                **_times(row, ev), "reader": ev.reader, "seq": getattr(ev, "seq", None),
                "code": getattr(ev, "code", None), "burn": bool(getattr(ev, "burn", False)),
                "failure": ev.reason if ev.type == "read_failed" else None,
                "registered": card.data.get("position") if card is not None else None,
                "rejected": ({"position": bad.data.get("position"), "reason": bad.data.get("reason"),
                              "detail": bad.data.get("detail")} if bad is not None else None),
                "set_aside": burned is not None, "refusal": refused})
            if card is not None and card.data.get("card") is None:
                private.setdefault(str(card.data.get("position")), None)
        elif ev.type == "place_bet":
            report["bets"].append({**_times(row, ev), "player": ev.player_id, "bet_id": ev.bet_id,
                                   "bet_type": ev.bet_type, "stake": str(ev.stake), "seat": ev.seat,
                                   "accepted": any(n.event == "bet_accepted" for n in notes),
                                   "refusal": refused or next((str(n.data.get("reason")) for n in notes
                                                               if n.event == "bet_rejected"), None)})
        elif ev.type in _PLAY_ROWS:
            done = [n for n in notes if n.event in _PLAY_NOTES]
            base = {**_times(row, ev), "type": ev.type, "refusal": refused}
            if not done:
                report["plays"].append({**base, "player": getattr(ev, "player_id", None),
                                        "action": getattr(ev, "action", None),
                                        "amount": None if getattr(ev, "amount", None) is None else str(ev.amount),
                                        "card": getattr(ev, "card", None), "street": None,
                                        "by": "timer" if "timeout" in ev.type else "player",
                                        "reserve": bool(getattr(ev, "reserve", False))})
            for n in done:
                d = n.data
                total = d.get("total")
                report["plays"].append({**base, "player": d.get("player_id"), "action": d.get("action"),
                                        "amount": total if total is not None and Decimal(str(total)) else None,
                                        "card": d.get("card"), "street": d.get("street"),
                                        "by": "timer" if d.get("by") == "timeout" else str(d.get("by") or "player"),
                                        "reserve": False})
        elif ev.type in _SUPERVISOR_ROWS:
            report["supervisor"].append({
                **_times(row, ev), "act": _SUPERVISOR_ROWS[ev.type], "supervisor": getattr(ev, "supervisor", None),
                "signature": getattr(ev, "signature", None) is not None,
                "issued_at": _iso(getattr(ev, "issued_at", None)),
                "reason": (f"{ev.kind}: {ev.detail}" if ev.type == "security_event"
                           else f"seat {ev.seat}: {ev.card}" + (f" ({ev.reason})" if ev.reason else "")
                           if ev.type == "supervisor_expose" else getattr(ev, "reason", None)),
                "applied": refused is None and ev.type != "security_event", "refusal": refused})
            if ev.type == "supervisor_void" and refused is None:
                report["void"] = {**_times(row, ev), "supervisor": ev.supervisor, "reason": ev.reason,
                                  "signature": ev.signature is not None,
                                  "issued_at": _iso(ev.issued_at)}
        for e in effects:
            if isinstance(e, StationPrompt) and e.kind == "RESCAN":
                report["rescans"].append({**_times(row, ev), "position": e.position, "reason": e.reason,
                                          "count": e.count, "message": e.message})
            if isinstance(e, PlayerMessage) and e.kind == "hole_card" and e.data.get("position"):
                private[str(e.data["position"])] = e.player_id
    shown = set(res.cards) if res is not None else set()
    cards = dict(rnd.cards) if rnd is not None else {}
    report["cards"] = [{"position": pos, "card": code, "private": pos in private,
                        "private_to": private.get(pos), "shown_in_result": pos in shown}
                       for pos, code in cards.items()]
    if res is not None:
        report["result"] = _result_part(res, rnd)
        if res.outcome == "VOIDED" and report["void"] is None:
            report["void"] = {"supervisor": None, "reason": res.reason, "signature": False}
    return report


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


def _result_part(res: RoundResult, rnd: Round | None) -> dict[str, Any]:
    """The result's outcome, hands and each accepted bet's payout (:func:`settle_bet`, the one
    arithmetic every settlement consumer uses)."""
    from dealer.core.settlement import SettlementError, settle_bet

    payouts: list[dict[str, Any]] = []
    bets = list(rnd.bets.values()) if rnd is not None else []
    lines: list[tuple[str, str, str, Decimal]] = [(b.bet_id, b.player_id, b.bet_type, b.stake) for b in bets]
    lines += [(f"{player}:play", player, "play", d.play_stake) for player, d in res.decisions.items()
              if d.play_stake is not None]
    for bet_id, player, bet_type, stake in lines:
        try:
            s = settle_bet(bet_type, stake, res, player)
        except SettlementError as exc:
            payouts.append({"bet_id": bet_id, "player": player, "bet_type": bet_type, "stake": str(stake),
                            "outcome": None, "returned": None, "net": None, "note": str(exc)})
            continue
        payouts.append({"bet_id": bet_id, "player": player, "bet_type": bet_type, "stake": str(s.stake),
                        "outcome": s.outcome, "returned": str(s.returned), "net": str(s.net)})
    return {"outcome": res.outcome, "winner": res.winner, "reason": res.reason, "refund_all": res.refund_all,
            "idempotency_key": res.idempotency_key, "opened_at": _iso(res.opened_at),
            "closed_at": _iso(res.closed_at), "finished_at": _iso(res.finished_at),
            "currency": res.money.currency, "cards": dict(res.cards),
            "hands": {k: {"cards": list(h.cards), "category": h.category} for k, h in res.hands.items()},
            "decisions": {p: json.loads(d.model_dump_json()) for p, d in res.decisions.items()},
            "payouts": payouts,
            "total_staked": str(sum((Decimal(p["stake"]) for p in payouts), Decimal(0))),
            "total_returned": str(sum((Decimal(p["returned"]) for p in payouts if p["returned"] is not None),
                                      Decimal(0)))}


def _yes(flag: bool) -> str:
    return "present" if flag else "absent"


def render_report(report: dict[str, Any]) -> str:
    """The dispute report as plain text, to be printed and signed."""
    r = report
    rows = r["journal"].get("rows") or {}
    private = any(c["private"] for c in r["cards"])
    out: list[str] = []
    title = f"DISPUTE REPORT  round {r['round_id']}"
    out += [title, "=" * len(title)]
    if private:
        out.append("CONTAINS PRIVATE HOLE CARDS: an auditor's document, not to be shown to players.")
    out += [
        f"Table             {r['table_id']}",
        f"Game              {r['game']}",
        f"Rules hash        {r['rules']['hash']}",
        f"Software version  {r['rules']['software_version'] or '(unknown)'}  (rules from {r['rules']['source']})",
        f"Journal           id {r['journal']['id']}  {r['journal']['path']}",
        f"Journal rows      #{rows.get('first')} to #{rows.get('last')}  (hash of row #{rows.get('last')}: "
        f"{rows.get('last_hash')})",
        f"Dealt by          {', '.join(r['dealers']) or '(nobody logged on)'}",
    ]
    o = r["opened"]
    if o is not None:
        by = (f"supervisor {o['by']} (signature {_yes(o['signature'])})" + (f": {o['reason']}" if o["reason"] else "")
              if o["by"] else "the backend (no supervisor's command)")
        out.append(f"Opened            {o['received_at']} by {by}")
    res = r["result"]
    if res is not None:
        out.append(f"Outcome           {res['outcome']}" + (f"  winner {res['winner']}" if res["winner"] else "")
                   + f"  at {res['finished_at']}")
    else:
        out.append("Outcome           (no result: the round is still in play in this journal)")
    out += [f"Report made       {r['made']['at']} by {r['made']['by']}, replaying the journal through the pure core",
            "Times             received = stamped where the input arrived; recorded = committed to the journal (UTC)"]

    out += ["", "1. DEALERS"]
    out.append(f"   Dealt by: {', '.join(r['dealers']) or '(nobody logged on)'}")
    for x in r["logons"]:
        out.append(f"   #{x['row']}  {x['received_at']}  dealer {x['dealer']} logged on"
                   + ("" if x["applied"] else f"  REFUSED: {x['refusal']}"))

    out += ["", "2. READS (reader, reader sequence, received, recorded)"]
    for x in r["reads"] or []:
        what = (f"no read ({x['failure']})" if x["failure"] else f"{x['code']}" + (" [burn]" if x["burn"] else ""))
        if x["registered"]:
            then = f"registered at {x['registered']}"
        elif x["rejected"]:
            rej = x["rejected"]
            then = f"REFUSED at {rej['position']}: {rej['reason']}" + (f" ({rej['detail']})" if rej["detail"] else "")
        elif x["set_aside"]:
            then = "set aside (burned)"
        else:
            then = f"not taken: {x['refusal']}" if x["refusal"] else "taken"
        seq = f"seq {x['seq']}" if x["seq"] is not None else "seq -"
        out.append(f"   #{x['row']:<6} {x['reader']:<8} {seq:<10} {what:<16} received {x['received_at']}  "
                   f"recorded {x['recorded_at']}  -> {then}")
    if not r["reads"]:
        out.append("   (none)")

    out += ["", "3. RESCANS"]
    for x in r["rescans"]:
        out.append(f"   #{x['row']:<6} {x['received_at']}  {x['position'] or '-'}  reason {x['reason']}"
                   + (f" (x{x['count']})" if x["count"] and x["count"] > 1 else "") + f": {x['message']}")
    if not r["rescans"]:
        out.append("   (none)")

    out += ["", "4. CARDS DEALT" + ("  (PRIVATE = a hole card: auditor's copy)" if private else "")]
    for c in r["cards"]:
        mark = ""
        if c["private"]:
            mark = "PRIVATE" + (f" to {c['private_to']}" if c["private_to"] else "")
            mark += ", shown in the result" if c["shown_in_result"] else ", never shown publicly"
        out.append(f"   {c['position']:<10} {c['card']:<6} {mark}".rstrip())
    if not r["cards"]:
        out.append("   (none)")

    out += ["", "5. BETS (player, time)"]
    for b in r["bets"]:
        seat = f" seat {b['seat']}" if b["seat"] is not None else ""
        verdict = "accepted" if b["accepted"] else f"REFUSED: {b['refusal']}"
        out.append(f"   #{b['row']:<6} {b['received_at']}  {b['player']}  bet {b['bet_id']}  {b['bet_type']} "
                   f"{b['stake']}{seat}  {verdict}")
    if not r["bets"]:
        out.append("   (none)")

    out += ["", "6. DECISIONS AND ACTIONS (player, time)"]
    for p in r["plays"]:
        what = " ".join(str(v) for v in (p["action"], p["card"]) if v is not None)
        what += f" (total {p['amount']})" if p["amount"] is not None else ""
        what = f"{p['street']}: {what}" if p.get("street") else what
        verdict = f"REFUSED: {p['refusal']}" if p["refusal"] else ("reserved" if p["reserve"] else "")
        out.append(f"   #{p['row']:<6} {p['received_at']}  {p['player'] or '-'}  {what or p['type']}  by {p['by']}"
                   + (f"  {verdict}" if verdict else ""))
    if not r["plays"]:
        out.append("   (none)")

    out += ["", "7. SUPERVISOR ACTS (who, signature, reason)"]
    for s in r["supervisor"]:
        verdict = "applied" if s["applied"] else f"REFUSED: {s['refusal'] or s['reason']}"
        issued = f"  signed at {s['issued_at']}" if s["issued_at"] else ""
        out.append(f"   #{s['row']:<6} {s['received_at']}  {s['act']}  by {s['supervisor'] or '(unknown)'}  "
                   f"signature {_yes(s['signature'])}{issued}  reason: {s['reason'] or '(none given)'}  {verdict}")
    if not r["supervisor"]:
        out.append("   (none)")

    out += ["", "8. RESULT AND PAYOUTS"]
    if res is None:
        out.append("   (no result yet)")
    else:
        out.append(f"   Outcome {res['outcome']}" + (f", winner {res['winner']}" if res["winner"] else "")
                   + (f", reason: {res['reason']}" if res["reason"] else "")
                   + (", every bet refunded" if res["refund_all"] else ""))
        out.append(f"   Settlement key {res['idempotency_key']}; opened {res['opened_at']}, betting closed "
                   f"{res['closed_at'] or '-'}, finished {res['finished_at']}")
        for name, h in res["hands"].items():
            out.append(f"   Hand {name}: {' '.join(h['cards'])}  ({h['category']})")
        for player, d in res["decisions"].items():
            out.append(f"   Decision {player}: {d['action']} by {d['by']}")
        out.append(f"   {'bet':<24} {'player':<12} {'type':<14} {'stake':>12} {'outcome':<8} {'returned':>12} "
                   f"{'net':>12}  ({res['currency']})")
        for p in res["payouts"]:
            if p["outcome"] is None:
                out.append(f"   {p['bet_id']:<24} {p['player']:<12} {p['bet_type']:<14} {p['stake']:>12} "
                           f"not settled: {p['note']}")
                continue
            out.append(f"   {p['bet_id']:<24} {p['player']:<12} {p['bet_type']:<14} {p['stake']:>12} "
                       f"{p['outcome']:<8} {p['returned']:>12} {p['net']:>12}")
        out.append(f"   Total staked {res['total_staked']}, total returned {res['total_returned']} {res['currency']}")

    out += ["", "9. VOID"]
    v = r["void"]
    if v is None:
        out.append("   Not voided.")
    elif v.get("supervisor"):
        out.append(f"   VOIDED by supervisor {v['supervisor']} at {v['received_at']} (signature {_yes(v['signature'])}"
                   + (f", signed at {v['issued_at']}" if v.get("issued_at") else "") + f"): {v['reason']}")
    else:
        out.append(f"   VOIDED: {v['reason']}")

    out += ["", "SIGNATURES", "",
            "   Prepared by (name) ______________________  Signature ______________________  Date __________", "",
            "   Reviewed by (name) ______________________  Signature ______________________  Date __________", ""]
    return "\n".join(out)


# --- dealer hand --round ------------------------------------------------------------------------


def hand_check(rep: Replayed, journal: Any | None = None) -> dict[str, Any]:
    """The recorded round's hands re-evaluated with the game's hand report (tools/games.py) under
    the rules it was played with, beside its result, and whether they agree (``agrees``: True,
    False, or None when no hand decided the round: a void, a cancellation, a pot won by folds).
    With ``journal``, the result still waiting in its outbox (as published) is compared too."""
    from tools.games import PlayedRound, kit

    res, rnd = rep.result, rep.round
    if res is None or rnd is None:
        raise RecallError(f"round {rep.record['round_id']} has no result in this journal (still in play): "
                          "there is nothing recorded to check")
    out: dict[str, Any] = {
        "round_id": res.round_id, "table_id": res.table_id, "game": res.game,
        "rules": {k: rep.record["rules"][k] for k in ("hash", "software_version", "source")},
        "options": json.loads(rep.rules.game.options.model_dump_json()),
        "recorded": json.loads(res.model_dump_json()),
    }
    if journal is not None:
        out["published"] = _published(journal, res)
    command = kit(res.game).hand
    if command is None or command.recorded is None:
        raise RecallError(f"no hand report of game {res.game} can re-evaluate a recorded round")
    if res.outcome != "COMPLETED":
        out.update(report=None, agrees=None, compared=[], differences=[],
                   note=f"the round was {res.outcome.lower()} ({res.reason}): no hand decided it, every bet refunded")
        return out
    seats = dict(rnd.seat_owner)
    check = command.recorded(PlayedRound(res, dict(rnd.cards), rep.rules.game.options, seats, rnd.hand))
    out.update(check)
    if out.get("published", {}).get("same") is False:
        out["agrees"] = False
        out["differences"] = [*out["differences"], "the result in the outbox (as published) differs from the replay"]
    return out


def _published(journal: Any, res: RoundResult) -> dict[str, Any]:
    """The round's result as it waits in the outbox (published, not yet acknowledged), joined
    from its parts, compared with the replay's. Once settlement acknowledged it, the outbox
    row is gone: ``in_outbox`` False."""
    from dealer.core.result_parts import join_parts

    key = res.idempotency_key
    rows = [r for r in journal.pending([res.table_id]) if r.key == key or r.key.startswith(key + "#")]
    if not rows:
        return {"in_outbox": False, "same": None}
    manifest = next((r for r in rows if r.key == key), None)
    if manifest is None:
        return {"in_outbox": True, "same": False}
    head = RoundResult.model_validate_json(manifest.payload)
    whole = join_parts(head, [RoundResultPart.model_validate_json(r.payload) for r in rows if r is not manifest])
    return {"in_outbox": True, "same": whole == res}


def hand_for_round(round_id: str, *, journal: str | Path | None = None,
                   config: str | Path | None = None) -> dict[str, Any]:
    """``dealer hand --round``: the round replayed from ``journal`` (a path or URL), else from the
    journal of ``config``, then :func:`hand_check`."""
    settings = load_settings(config) if config is not None else None
    target: str | Path = (journal if is_url(journal) else Path(journal)) if journal is not None \
        else target_of(settings)  # type: ignore[arg-type]
    configured = {t.id: t for t in settings.tables} if settings is not None else {}
    with _reading(target) as j:
        picked = select_rounds(j, None, Selection(rounds=(round_id,)),
                               lambda t: configured[t].rules() if t in configured else None)
        return hand_check(picked[0], j)


# --- dealer recall ------------------------------------------------------------------------------


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(args.config)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _cmd_recall(args: argparse.Namespace) -> int:
    prog = "dealer recall"
    if not (args.config or args.journal):  # never a default path: say which journal to read
        print(f"{prog}: give --journal PATH_OR_URL (a journal file or a postgresql:// URL) or --config FILE",
              file=sys.stderr)
        return 2
    if args.report and not args.round_ids:
        print(f"{prog}: --report is one round's dispute report: give --round ROUND_ID", file=sys.stderr)
        return 2
    try:
        selection = Selection(rounds=tuple(args.round_ids or ()),
                              since=parse_time(args.since, "--since") if args.since is not None else None,
                              until=parse_time(args.until, "--until") if args.until is not None else None,
                              player=args.player, last=args.rounds)
        settings = _settings(args) if args.config else None
        if settings is not None and args.journal is None and args.table is not None \
                and all(t.id != args.table for t in settings.tables):
            raise ValueError(f"table {args.table!r} is not in this configuration ({[t.id for t in settings.tables]})")
        target: str | Path = ((args.journal if is_url(args.journal) else Path(args.journal)) if args.journal
                              else target_of(settings))  # type: ignore[arg-type]
        picked = recall_journal(target, args.table, selection, settings)
    except (ConfigError, ValueError) as exc:  # RecallError, JournalError (a missing journal), bad rules
        print(f"{prog}: {_one_line(exc)}", file=sys.stderr)
        return 2
    if args.report:
        reports = [dispute_report(r) for r in picked]
        if args.json:
            print(json.dumps(reports, indent=2, sort_keys=True, ensure_ascii=False))
        else:
            print("\f\n".join(render_report(r) for r in reports) if reports else "no round matches the selection")
        return 0
    rounds = [r.record for r in picked]
    if args.json:
        print(json.dumps(rounds, indent=2, sort_keys=True))
    else:
        print(render_recall(rounds) if rounds else "no round matches the selection")
    return 0


def anchor_from_broker(settings: Settings, timeout: float = 10.0) -> tuple[int, str]:
    """The head the backend last published, retained, on ``studio/v1/backends/{node}/journal``,
    read with the configuration's broker and credentials (an auditor's own, e.g. the ops user).
    Raises ValueError when none arrives within ``timeout`` or it is malformed."""
    import asyncio
    import secrets

    from dealer.edge import topics
    from dealer.edge.runner import mqtt_password
    from drivers.mqtt import MqttBus

    m = settings.mqtt
    if m.url is None:
        raise ValueError("--anchor-from-broker needs [mqtt] url in the configuration")
    topic = topics.backend_journal(settings.service.node_id)

    async def read() -> bytes:
        got: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        bus = MqttBus(m.urls, client_id=f"audit-{secrets.token_hex(4)}", username=m.username,
                      password=mqtt_password(settings), accept_retained=True, ca_file=m.ca_file,
                      cert_file=m.cert_file, key_file=m.key_file)
        bus.subscribe(topic, lambda _t, p: got.done() or got.set_result(p))
        task = asyncio.create_task(bus.run())
        try:
            async with asyncio.timeout(timeout):
                return await got
        except TimeoutError:
            raise ValueError(f"no retained journal anchor on {topic} at {m.url} within {timeout:g} s") from None
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    payload = asyncio.run(read())
    try:
        return parse_anchor(str(json.loads(payload)["anchor"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"the journal anchor on {topic} is malformed: {exc}") from None


def _cmd_verify(args: argparse.Namespace) -> int:
    if not (args.config or args.journal):  # never a default path: say which journal to audit
        print("dealer audit verify: give --config FILE (its [service] journal_url or journal_path) or "
              "--journal PATH_OR_URL", file=sys.stderr)
        return 2
    try:
        settings = _settings(args) if args.config else None
    except ConfigError as exc:
        print(f"dealer audit verify: {exc}", file=sys.stderr)
        return 2
    try:
        target: str | Path = ((args.journal if is_url(args.journal) else Path(args.journal)) if args.journal
                              else target_of(settings))  # type: ignore[arg-type]
        # read-only: a missing journal is refused, never created
        journal = open_read_only(target)
    except JournalError as exc:  # missing, unreachable, not a journal, damaged, too old: one clear line
        print(f"dealer audit verify: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    path = journal.path  # a URL without its password
    journal_id = journal.journal_id
    try:
        anchors = [parse_anchor(a) for a in args.anchor or ()]
        if args.anchor_from_broker:
            if settings is None:
                raise ValueError("--anchor-from-broker needs --config (the broker and the node id)")
            anchors.append(anchor_from_broker(settings))
    except ValueError as exc:
        journal.close()
        print(f"dealer audit verify: {exc}", file=sys.stderr)
        return 2
    try:
        report = audit_verify(journal, anchors)
    except sqlite3.DatabaseError as exc:  # damage that only the walk reads
        print(f"dealer audit verify: journal {path} is damaged: {exc}", file=sys.stderr)
        return 2
    except JournalWriteFailed as exc:  # the journal's database went away during the walk
        print(f"dealer audit verify: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    finally:
        journal.close()
    print(json.dumps({"journal": str(path), "journal_id": journal_id, "rows": report.rows, "segments": report.segments,
                      "anchors": report.anchors, "ok": report.ok, "first_broken": report.first_broken,
                      "segment": report.segment, "reason": report.reason, "uncommitted": report.uncommitted},
                     sort_keys=True))
    return 0 if report.ok else 1


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from dealer.cli.args import CONFIG_HELP, int_range

    r = sub.add_parser("recall", help="rounds of a table with every event, replayed from the journal: the last ones, "
                       "or by round id, time range or player; --report prints a round's dispute report",
                       description="Replay rounds from a journal through the same pure core that ran them. Without a "
                       "selector: the table's last 10 rounds. Selectors (all must hold): --round (repeatable), "
                       "--since/--until (the round's open..result overlaps the range), --player. The journal is read, "
                       "never created or written: --journal PATH_OR_URL, or the journal of --config. Without --config "
                       "each round's rules come from the journal's table_rules events.")
    r.add_argument("table", metavar="TABLE", nargs="?",
                   help="the table id, e.g. TP1 (may be left out with --round: a round id names its table)")
    r.add_argument("--config", metavar="FILE",
                   help=CONFIG_HELP + "; its journal (journal_url, else journal_path) is read, never created or "
                   "written, and its tables' rules are used for rounds journaled before rules events")
    r.add_argument("--journal", metavar="PATH_OR_URL",
                   help="the journal to read: a SQLite file or a postgresql:// URL (read-only, never created; "
                        "instead of --config's journal)")
    r.add_argument("--round", dest="round_ids", action="append", metavar="ROUND_ID",
                   help="this round, e.g. TP1-7l6gbdyb-000042 (repeatable)")
    r.add_argument("--since", metavar="TIME",
                   help="rounds still running at or after TIME: ISO-8601 with Z or an offset, e.g. "
                        "2027-01-15T08:00:00Z or 2027-01-15T09:00:00+01:00")
    r.add_argument("--until", metavar="TIME", help="rounds opened at or before TIME (ISO-8601 with Z or an offset)")
    r.add_argument("--player", metavar="PLAYER_ID", help="rounds in which this player bet, decided or acted")
    r.add_argument("--rounds", type=int_range(1, 100_000), default=None, metavar="N",
                   help="the last N of the rounds selected (default: 10 without a selector, else all selected)")
    r.add_argument("--report", action="store_true",
                   help="print each --round's dispute report: plain text to print and sign (hole cards included, "
                        "marked private)")
    r.add_argument("--json", action="store_true", help="print the rounds (or the reports) as JSON")
    r.set_defaults(func=_cmd_recall)
    a = sub.add_parser("audit", help="journal audit")
    asub = a.add_subparsers(dest="audit", required=True)
    v = asub.add_parser("verify", help="check the journal's hash chain across its segments; exit 1 at the first "
                        "broken link, missing or altered segment, or anchor not matched")
    v.add_argument("--config", metavar="FILE",
                   help=CONFIG_HELP + "; the journal audited is its journal_url, else its journal_path")
    v.add_argument("--journal", metavar="PATH_OR_URL",
                   help="a journal file, or a postgresql:// URL (instead of --config's journal)")
    v.add_argument("--anchor", action="append", metavar="ROW_ID:HASH",
                   help="a head published on studio/v1/backends/{node}/journal (retained): the row must exist "
                        "with this hash, so rows cut off the end are found (repeatable)")
    v.add_argument("--anchor-from-broker", action="store_true",
                   help="also check the anchor retained on the broker of --config for its node_id")
    v.set_defaults(func=_cmd_verify)
