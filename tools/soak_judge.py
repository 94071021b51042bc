"""The soak's judgments of every game, read from the journal replayed through the core.

:func:`replay` runs each table's whole journal (segments first, then the live rows: the rows
``dealer recall`` reads) through the pure core, table by table, from its first ``table_rules``
row, exactly as the backend ran it, and collects:

* every result the replay produces (the soak compares them with what settlement applied: the
  journal replays to the very results that were paid, house AI moves included);
* every move the **timer** made (``action_timeout``, ``decision_timeout``, ``confirm_timeout``
  rows the core accepts), with whom it played for, its turn and its instant;
* every turn given, and every move made, by (table, round, turn): a turn given to two players,
  or played twice, is a turn dealt twice;
* journaled rows the core refuses on replay (a house move among them: the AI's moves must
  replay identically), and what each game's players did (the coverage the summary reports).

:func:`judge_timers` gives each timer move its cause. A player left that turn to the timer on
purpose (``player_silent``): fine. Any other timer move on a player's or the house AI's turn is
a discrepancy, named by the faults its window overlapped (the backend, broker, house worker or
network down) or ``no_outage``. A ``confirm_timeout`` (the station's exposure window, not a
player's move) is counted by cause too, and is a discrepancy only when an outage overlapped it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from dealer.core.events import EVENT_ADAPTER
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult
from dealer.core.rules import rules_from_canonical
from dealer.games import game_class
from dealer.core.table import Table

HOUSE_AI = "house-ai"
TIMEOUT_ROWS = ("action_timeout", "decision_timeout", "confirm_timeout")
#: Faults that make the house unreachable for a player (the timer must then wait): by kind.
OUTAGE_OF = {"broker_restart": "broker", "link_loss_before_close": "broker", "link_loss_after_close": "broker",
             "exposure_broker_loss": "broker", "backend_kill": "backend", "backend_down_long": "backend",
             "backend_kill_in_turn": "backend", "house_worker_kill": "worker", "disk_full": "journal",
             "clock_step": "clock", "node_kill": "backend", "node_pause": "backend", "node_term": "backend",
             "postgres_restart": "journal", "lease_move_in_rematch": "backend", "settlement_down": "settlement",
             "settlement_slow": "settlement", "reader_unplug": "reader", "oversize_round": "load"}


@dataclass(frozen=True)
class TimerMove:
    table_id: str
    round_id: str
    kind: str  # action_timeout | decision_timeout | confirm_timeout
    player: str | None  # who the timer played for (None: the station's window)
    turn: int | None
    at: int  # when the timer fired (the backend's clock, epoch ms)
    window_ms: int  # how long the turn (or window) had run


@dataclass
class Replay:
    results: dict[str, RoundResult] = field(default_factory=dict)  # key -> the result the replay produced
    timer_moves: list[TimerMove] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)  # row type -> journaled rows the replay refuses
    refused_examples: list[str] = field(default_factory=list)
    dealt_twice: list[str] = field(default_factory=list)
    house_moves: int = 0
    house_refused: list[str] = field(default_factory=list)
    coverage: dict[str, Counter[str]] = field(default_factory=dict)  # game -> what happened, counted
    rows: int = 0
    problems: list[str] = field(default_factory=list)  # a table that cannot be replayed at all


def replay(journal: Any, tables: Iterable[str]) -> Replay:
    """Replay every table of ``journal`` (a :class:`~dealer.edge.journal.Journal` or a PostgreSQL
    journal opened read-only) through the core (see the module docstring)."""
    out = Replay()
    series = getattr(journal, "journal_id", None) or None
    for tid in tables:
        try:
            _replay_table(journal, tid, series, out)
        except Exception as exc:  # reported, never hidden: the replay is a judgment of its own
            out.problems.append(f"{tid}: the journal does not replay through the core: {type(exc).__name__}: {exc}")
    return out


def _replay_table(journal: Any, tid: str, series: str | None, out: Replay) -> None:
    table: Table | None = None
    game = "?"
    acted: Counter[tuple[str, int]] = Counter()  # (round, turn) -> moves applied
    given: dict[tuple[str, int], str] = {}  # (round, turn) -> the player it was given to
    for row in journal.rows(tid):
        ev = EVENT_ADAPTER.validate_json(row.body)
        if table is None:
            if ev.type != "table_rules":
                continue  # rows before the first rules (none in a soak's journal)
            rules = rules_from_canonical(tid, ev.rules, ev.software_version, games=game_class)
            table = Table(rules, series=series)
        out.rows += 1
        game = table.rules.game.name
        cov = out.coverage.setdefault(game, Counter())
        current = table.current
        rid = row.round_id or (current.round_id if current is not None else "")
        step = table.handle(ev)
        if not step.accepted:
            out.refused[ev.type] += 1
            if len(out.refused_examples) < 20:
                reason = next((getattr(e, "reason", "") for e in step.effects), "")
                out.refused_examples.append(f"{tid} row {row.id} ({ev.type}): {reason}")
            if ev.type == "player_action" and getattr(ev, "player_id", None) == HOUSE_AI:
                out.house_refused.append(f"{tid}:{rid} row {row.id}: {ev.model_dump_json(exclude={'at'})}")
            continue
        rnd = table.current if table.current is not None and table.current.round_id == rid else current
        if ev.type == "player_action":
            pa: Any = ev
            if pa.player_id == HOUSE_AI:
                out.house_moves += 1
            if pa.turn is not None and not pa.reserve:
                acted[(rid, pa.turn)] += 1
                if acted[(rid, pa.turn)] == 2:
                    out.dealt_twice.append(f"{tid}:{rid}: turn {pa.turn} played twice (row {row.id})")
        elif ev.type in TIMEOUT_ROWS:
            tm: Any = ev
            if tm.type == "action_timeout":
                acted[(rid, tm.turn)] += 1
                if acted[(rid, tm.turn)] == 2:
                    out.dealt_twice.append(f"{tid}:{rid}: turn {tm.turn} played twice (row {row.id}, by the timer)")
            window = (rnd.rules.action_ms if tm.type == "action_timeout" else rnd.rules.decision_ms
                      if tm.type == "decision_timeout" else 0) if rnd is not None else 0
            players = [e.data.get("player_id") for e in step.effects if isinstance(e, RoundEvent)
                       and e.event in ("player_acted", "decision_made") and e.data.get("by") == "timeout"]
            for p in players or [None]:
                out.timer_moves.append(TimerMove(tid, rid, tm.type, p, getattr(tm, "turn", None), tm.at,
                                                 window or _confirm_window(rnd)))
        for e in step.effects:
            if isinstance(e, RoundResult):
                out.results[e.idempotency_key] = e
                _cover_result(cov, e)
            elif isinstance(e, RoundEvent):
                _cover_event(cov, e, given, tid, out)
            elif isinstance(e, PlayerMessage) and e.kind == "reservation_accepted":
                cov["reservations_accepted"] += 1


def _confirm_window(rnd: Any) -> int:
    try:
        return int(rnd.plan[rnd.next_index].window_ms or 0)
    except (AttributeError, IndexError, TypeError):
        return 0


def _cover_event(cov: Counter[str], e: RoundEvent, given: dict[tuple[str, int], str], tid: str, out: Replay) -> None:
    d = e.data
    if e.event == "player_acted":
        who = "house" if d.get("player_id") == HOUSE_AI else "player"
        cov[f"{who}:{d.get('button') or d.get('action')}"] += 1
        if d.get("by") == "reservation":
            cov["reservations_executed"] += 1
        if d.get("all_in"):
            cov["all_in"] += 1
    elif e.event == "turn":
        key = (e.round_id or "", int(d.get("turn") or 0))
        player = str(d.get("player_id"))
        if given.setdefault(key, player) != player:
            out.dealt_twice.append(f"{tid}:{key[0]}: turn {key[1]} given to {given[key]} and to {player}")
        if d.get("choice"):
            cov[f"choice:{d['choice']}"] += 1
        if d.get("resumed"):
            cov["turns_resumed"] += 1
    elif e.event in ("rematch", "redeal", "confirm_window"):
        cov[e.event + ("_resumed" if d.get("resumed") else "")] += 1
    elif e.event == "decision_made":
        cov[f"decision:{d.get('action')}"] += 1


def _cover_result(cov: Counter[str], r: RoundResult) -> None:
    cov[f"result:{r.outcome}"] += 1
    pots = r.details.get("pots")
    if isinstance(pots, list) and len(pots) > 1:
        cov["side_pots"] += 1
    kind = r.details.get("kind")
    if r.game == "matgo" and kind:
        cov[f"matgo:{kind}"] += 1
    if r.game == "matgo" and r.details.get("deals", 1) and int(r.details.get("deals") or 1) > 1:
        cov["redealt_rounds"] += 1
    if r.game == "seotda" and int(r.details.get("rematches") or 0) > 0:
        cov["rematched_rounds"] += 1


def judge_timers(moves: Sequence[TimerMove], silent: set[tuple[str, str, str, int]],
                 faults: Sequence[tuple[str, int, int]], *, judged_elsewhere: Iterable[str] = ("decision_timeout",),
                 margin_ms: int = 1000) -> tuple[list[str], dict[str, int]]:
    """(discrepancies, timer moves counted by cause). ``silent``: (table, player, round, turn) a
    player left to the timer on purpose; ``faults``: (kind, start, end) on the backend's clock.
    Decision timeouts are judged by the reconciliation already (counted here only)."""
    found: list[str] = []
    causes: Counter[str] = Counter()
    skip = set(judged_elsewhere)
    for m in moves:
        if m.player is not None and m.turn is not None and (m.table_id, m.player, m.round_id, m.turn) in silent:
            causes["player_silent"] += 1
            continue
        start = m.at - m.window_ms - margin_ms
        lived = sorted({OUTAGE_OF.get(kind, kind) for kind, a, b in faults if a <= m.at and b >= start})
        cause = "+".join(f"outage:{x}" for x in lived) if lived else "no_outage"
        who = "station" if m.kind == "confirm_timeout" else "house" if m.player == HOUSE_AI else "player"
        causes[f"{who}:{cause}"] += 1
        if m.kind in skip or (who == "station" and not lived):
            continue
        what = ("the timer closed the exposure window" if who == "station" else
                f"the timer played {m.player}'s turn {m.turn}")
        found.append(f"{m.table_id}:{m.round_id}: {what} ({m.kind} at {m.at}) "
                     + (f"while the house was down: {', '.join(lived)}" if lived else
                        "although the player answers every turn in time (no outage overlapped it)"))
    return found, dict(sorted(causes.items()))


def compare_results(replayed: dict[str, RoundResult], paid: dict[str, RoundResult]) -> list[str]:
    """Every result settlement applied is the result the journal replays to (and the other way)."""
    found: list[str] = []
    for key, r in sorted(paid.items()):
        again = replayed.get(key)
        if again is None:
            found.append(f"{key}: the journal does not replay to this applied result")
        elif again != r:
            a, b = json.loads(r.model_dump_json()), json.loads(again.model_dump_json())
            diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            found.append(f"{key}: the replayed result differs from the one applied in {diff}")
    for key in sorted(set(replayed) - set(paid)):
        found.append(f"{key}: the journal replays to a result settlement never applied")
    return found


def peer_money(results: dict[str, RoundResult], stakes: dict[str, dict[str, Decimal]]) -> tuple[list[str], dict[str, Any]]:
    """Each turn game's round on its own: the chips (or cover) brought come back exactly, less the
    rake (stud) or the house's win (Matgo), and the pots (side pots too) hold what is returned.
    ``stakes``: key -> player -> the accepted stake brought."""
    found: list[str] = []
    rake = Decimal(0)
    house = Decimal(0)
    for key, r in sorted(results.items()):
        if r.game not in ("stud", "seotda", "matgo"):
            continue
        brought = sum(stakes.get(key, {}).values(), Decimal(0))
        if r.refund_all:
            continue
        back = sum((b.returned or Decimal(0) for bets in r.player_bets.values() for b in bets.values()), Decimal(0))
        if r.game == "matgo":
            house += brought - back
            points = Decimal(str(r.details.get("money") or 0))
            if back - brought not in (points, -min(points, brought), Decimal(0)):
                found.append(f"{key}: Matgo returned {back} for a cover of {brought} and {points} won or lost")
            continue
        taken = Decimal(str(r.details.get("rake") or 0))
        rake += taken
        if brought != back + taken:
            found.append(f"{key}: chips not conserved in the hand: {brought} brought, {back} returned, {taken} raked")
        pots = r.details.get("pots")
        if isinstance(pots, list) and pots and all(isinstance(p, dict) and "amount" in p for p in pots):
            in_pots = sum((Decimal(str(p["amount"])) for p in pots), Decimal(0))
            total = Decimal(str(r.details.get("total_pot") or in_pots + taken))
            if in_pots + taken != total:
                found.append(f"{key}: the pots hold {in_pots} + rake {taken}, not the {total} put in")
    return found, {"rake": str(rake), "house_net_matgo": str(house)}


__all__ = ["HOUSE_AI", "Replay", "TimerMove", "compare_results", "judge_timers", "peer_money", "replay"]
