"""The fault soak (``dealer soak``): a small real run, and its reconciliation on planted errors."""

from __future__ import annotations

import argparse
import json
from decimal import Decimal
from pathlib import Path

import pytest

from dealer.edge.config import TableConfig
from dealer.core.events import CloseBetting, OpenRound, PlaceBet, ScanRead
from dealer.core.messages import DecisionRecord, RoundResult
from dealer.core.settlement import settle_bet
from dealer.core.table import Table
from tools.soak import (
    FAULT_KINDS,
    SoakData,
    _StationScreen,
    reconcile,
    register,
    run_soak,
    scan_backend_log,
)

pytestmark = pytest.mark.integration  # the soak: brokers, dealer run processes, faults

DEAL = ["AS", "KS", "AD", "KH", "AC", "KC"]  # A: three aces, B: three kings


def _completed_round(table: Table, round_id: str, bets: list[tuple[str, str, str, str]]) -> bytes:
    """Play one round through the real core and return its result's bytes."""
    table.handle(OpenRound(round_id=round_id, at=1, betting_closes_at=2))
    for bet_id, player, bet_type, stake in bets:
        assert table.handle(PlaceBet(bet_id=bet_id, player_id=player, bet_type=bet_type, stake=stake, at=1)).accepted
    table.handle(CloseBetting(at=2))
    for code in DEAL:
        step = table.handle(ScanRead(reader="R1", code=code, at=3))
    return next(e for e in step.effects if isinstance(e, RoundResult)).model_dump_json().encode()


def _data() -> tuple[SoakData, bytes]:
    """A clean two-round run of table T1: every bet settled once, at the right amount."""
    cfg = TableConfig(id="T1", game="teen-patti", scanner={"kind": "serial", "port": "/dev/null", "reader_id": "R1"})
    table = Table(cfg.rules())
    r1 = _completed_round(table, "T1-000001", [("T1-000001-b1", "p1", "player_a", "10.00"),
                                               ("T1-000001-b2", "p2", "player_b", "5.00")])
    r2 = _completed_round(table, "T1-000002", [("T1-000002-b4", "p1", "tie", "5.00")])
    bets = [("T1-000001-b1", "T1-000001", "p1", "player_a", "10.00"),
            ("T1-000001-b2", "T1-000001", "p2", "player_b", "5.00"),
            ("T1-000001-b3", "T1-000001", "p2", "tie", "1.00"),  # sent too late: never accepted
            ("T1-000002-b4", "T1-000002", "p1", "tie", "5.00")]
    ledger = []
    for bet_id, round_id, player, bet_type, stake in bets:
        result = RoundResult.model_validate_json(r1 if round_id == "T1-000001" else r2)
        if bet_id in result.accepted_bets.bet_ids:
            s = settle_bet(bet_type, stake, result, player)
            outcome, returned = s.outcome, str(s.returned)
        else:
            outcome, returned = "NOT_ACCEPTED", stake
        ledger.append((bet_id, f"T1:{round_id}", player, bet_type, stake, outcome, returned))
    data = SoakData(
        tables=["T1"], opened={"T1": ["T1-000001", "T1-000002"]},
        closed={"T1-000001", "T1-000002"},
        deliveries={"T1:T1-000001": [r1, r1], "T1:T1-000002": [r2]},  # delivered twice, applied once
        applied=[("T1:T1-000001", r1.decode()), ("T1:T1-000002", r2.decode())],
        bets=bets, ledger=ledger,
    )
    return data, r1


def test_reconciliation_passes_a_clean_run():
    data, _ = _data()
    rec = reconcile(data)
    assert rec.discrepancies == []
    assert rec.stats["results"] == 2 and rec.stats["completed"] == 2
    chips = rec.stats["chips"]
    assert Decimal(chips["escrow"]) == 0 and chips["before"] == chips["after"]
    # A's three aces beat B's three kings: p1 wins 9.50 on player_a and loses 5 on the tie, p2 loses 5
    assert -Decimal(chips["players_net"]) == Decimal(chips["house_net"]) == Decimal("0.50")


def test_reconciliation_reports_a_double_settlement_and_a_missing_result():
    data, _ = _data()
    data.ledger.append(data.ledger[0])  # T1-000001-b1 paid a second time
    data.applied = [a for a in data.applied if a[0] != "T1:T1-000002"]  # round 2's result never applied
    data.deliveries.pop("T1:T1-000002")
    data.ledger = [line for line in data.ledger if line[1] != "T1:T1-000002"]
    found = reconcile(data).discrepancies
    assert any("T1-000001-b1" in d and "settled 2 times" in d for d in found), found
    assert any(d.startswith("T1:T1-000002: no result applied") for d in found), found
    assert any("T1-000002-b4" in d and "never settled" in d for d in found), found
    assert any(d.startswith("chips not conserved") for d in found), found


def test_reconciliation_reports_changed_content_wrong_amounts_and_bad_cancellations():
    data, r1 = _data()
    data.deliveries["T1:T1-000001"].append(r1.replace(b'"winner":"A"', b'"winner":"B"'))
    bet_id, key, player, bet_type, stake, outcome, returned = data.ledger[0]
    data.ledger[0] = (bet_id, key, player, bet_type, stake, outcome, str(Decimal(returned) + 1))
    cancelled = RoundResult.model_validate_json(data.applied[1][1]).model_copy(
        update={"outcome": "CANCELLED", "refund_all": True, "reason": "dealer went home", "cards": {}})
    data.applied[1] = ("T1:T1-000002", cancelled.model_dump_json())
    data.deliveries["T1:T1-000002"] = [cancelled.model_dump_json().encode()]
    found = reconcile(data).discrepancies
    assert any("different contents" in d for d in found), found
    assert any(d.startswith(f"bet {bet_id} ") and "the result gives" in d for d in found), found
    assert any("CANCELLED but not by a link loss" in d for d in found), found
    assert any("CANCELLED after its betting had closed" in d for d in found), found


def test_register_adds_the_soak_command():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["soak", "--tables", "3", "--rounds", "7", "--seed", "5", "--fault-rate", "0.2"])
    assert (args.tables, args.rounds, args.seed, args.fault_rate, args.workdir) == (3, 7, 5, 0.2, None)
    assert callable(args.func)


@pytest.mark.timeout(300)
async def test_small_soak_of_every_game_with_every_fault_kind_reconciles(tmp_path: Path):
    """One table of each of the five games (and the big Teen Patti table) x 2 rounds against the
    real ``dealer run`` process, broker and PTYs, with a fault rate high enough that every kind
    of fault happens: the house worker killed mid-decision, the backend killed in a stud or
    Seotda turn, the broker lost in the stud exposure window among them."""
    summary = await run_soak(tables=5, rounds=2, seed=3, workdir=tmp_path / "soak", fault_rate=0.4,
                             card_fault_rate=0.1)
    assert summary["discrepancies"] == []
    assert summary["ok"] is True
    missing = [k for k in FAULT_KINDS if summary["faults"][k] < 1]
    assert not missing, f"fault kinds never injected: {missing} ({summary['faults']})"
    assert summary["rounds"]["min"] >= 2
    assert summary["results"] == summary["completed"] + summary["cancelled"] + summary["voided"]
    assert summary["voided"] == 0
    checks = summary["link_loss_checks"]
    assert checks["before_close_must_cancel"] >= 1 and checks["after_close_must_complete"] >= 1
    assert summary["chips"]["escrow"] == "0.00" and summary["chips"]["before"] == summary["chips"]["after"]
    assert summary["bets"]["placed"] == summary["bets"]["ledger_lines"] > 0
    # every game played and completed rounds; the first Seotda table asks 9-4 rematches and re-entries
    games = summary["games"]
    assert {g: games[g]["tables"] for g in games} == {"matgo": 1, "seotda": 1, "sevenluck": 1, "stud": 1,
                                                      "teen-patti": 2}  # with the big table, SBIG
    assert all(games[g]["completed"] >= 1 for g in games), games
    assert summary["seotda_asking_tables"] == ["S02"]
    # nobody was played for by the timer but on purpose (Sevenluck players decided themselves,
    # through a backend down longer than the window and a wall-clock step too)
    assert set(summary["timer_moves"]) <= {"player_silent"}, summary["timer_moves"]
    assert summary["decisions"]["made"] > 0 and summary["decisions"]["by_timeout"] == 0
    assert summary["backend_down_long_rounds"] >= 2 and summary["clock_steps_seconds"]
    # the journal replays through the core to exactly the results paid, the house AI's moves
    # included; its worker was killed and replaced mid-game
    assert summary["replay"]["results"] == summary["results"] and summary["replay"]["house_moves"] > 0
    assert summary["house_worker_kills"]["workers_killed"] >= 1
    # every result acknowledged once (the reconciliation checks it; here: it ran), one in parts,
    # the journal rolled segments and verifies against the retained anchor, the disk filled up
    assert summary["acks_journaled"] == summary["results"]
    assert summary["oversize_rounds"]["results_in_parts"] >= 1
    assert summary["journal"] == {"segments": summary["journal"]["segments"], "anchor_checked": True, "audit_ok": True}
    assert summary["journal"]["segments"] >= 1
    assert any(w["backend_alerted"] for w in summary["disk_full_windows"]), summary["disk_full_windows"]


def test_backend_log_scan_separates_loop_fd_races_from_real_tracebacks():
    race = ("Exception in callback <bound method Loop.add_writer of <uvloop.Loop running=True>>\n"
            "handle: <Handle Loop.add_writer>\nTraceback (most recent call last):\n  File \"uvloop/loop.pyx\"\n"
            "KeyError: 16\n\nDuring handling of the above exception, another exception occurred:\n\n"
            "Traceback (most recent call last):\nOSError: [Errno 9] Bad file descriptor\n")
    crash = "Traceback (most recent call last):\n  File \"dealer/edge/service.py\"\nTypeError: boom\n"
    line = '{"event": "link up"}\n'
    assert scan_backend_log(line + race + line) == {"tracebacks": 0, "loop_fd_races": 1}
    assert scan_backend_log(race + line + crash) == {"tracebacks": 1, "loop_fd_races": 1}


def test_backend_log_scan_reads_exceptions_in_json_lines():
    """Every line is JSON now (dealer/edge/logs.py): a traceback is an ``exception`` field."""
    def rec(logger: str, event: str, exception: str | None = "Traceback (most recent call last):\nX") -> str:
        return json.dumps({"event": event, "level": "error", "logger": logger, "timestamp": "t"}
                          | ({"exception": exception} if exception else {})) + "\n"

    race = rec("asyncio", "Exception in callback <bound method Loop.add_writer of <uvloop.Loop running=True>>")
    handled = rec("drivers.mqtt", "message handler failed")  # caught and logged by our own code
    lost = rec("asyncio", "Task exception was never retrieved")
    crash = rec("uncaught", "uncaught exception")
    assert scan_backend_log(race + handled + rec("dealer.edge.service", "link up", None)) == {
        "tracebacks": 0, "loop_fd_races": 1}
    assert scan_backend_log(lost + handled + crash) == {"tracebacks": 2, "loop_fd_races": 0}


def test_station_screen_never_shows_an_older_prompt_again():
    shown: list[dict] = []

    class Dealer:
        def on_prompt(self, topic: str, payload: bytes) -> None:
            shown.append(json.loads(payload))

    screen = _StationScreen(Dealer())  # type: ignore[arg-type]

    def prompt(round_id: str | None, step: int | None, at: int, kind: str = "NEXT") -> bytes:
        return json.dumps({"table_id": "T1", "round_id": round_id, "kind": kind, "step": step, "at": at}).encode()

    for payload in (prompt("T1-000002", 3, 10), prompt("T1-000002", 3, 10),  # a redelivered copy
                    prompt("T1-000001", 5, 50),  # a prompt of the previous round, redelivered late
                    prompt("T1-000002", 2, 9),  # an earlier step of this round
                    prompt("T1-000002", 4, 11), prompt(None, None, 12, "WAIT"),
                    prompt("T1-000003", 1, 13),
                    prompt("T1-000003", 1, 7, "RESCAN")):  # the backend's wall clock stepped back: still shown
        screen.on_prompt("t", payload)
    assert [(p["round_id"], p["step"], p["at"]) for p in shown] == [
        ("T1-000002", 3, 10), ("T1-000002", 4, 11), (None, None, 12), ("T1-000003", 1, 13), ("T1-000003", 1, 7)]
    assert screen.dropped == 3


def test_reconciliation_reports_a_player_timed_out_by_an_outage():
    data, r1 = _data()
    timed_out = RoundResult.model_validate_json(r1).model_copy(
        update={"decisions": {"p1": DecisionRecord(action="FOLD", by="timeout", seat=1)}})
    data.applied[0] = ("T1:T1-000001", timed_out.model_dump_json())
    data.deliveries["T1:T1-000001"] = [timed_out.model_dump_json().encode()]
    data.must_not_time_out = {"T1:T1-000001": "backend killed while deciding, down 3.0 s (window 1.5 s)"}
    found = reconcile(data).discrepancies
    assert any(d.startswith("T1:T1-000001: p1 timed out") and "backend killed while deciding" in d for d in found), found
    # not a planned outage: the faults the round lived through are named, the others are not
    data.must_not_time_out = {}
    r = timed_out
    data.faults = [("broker_restart", r.opened_at + 1, r.opened_at + 301),
                   ("disk_full", r.finished_at + 10, r.finished_at + 3000)]
    found = reconcile(data).discrepancies
    assert any(d.startswith("T1:T1-000001: p1 timed out") and "broker_restart at +1 ms for 300 ms" in d
               and "disk_full" not in d for d in found), found


def test_reconciliation_reports_results_never_acknowledged_or_acknowledged_twice():
    data, _ = _data()
    data.acked = ["T1:T1-000001", "T1:T1-000001"]
    found = reconcile(data).discrepancies
    assert "T1:T1-000001: acknowledgement journaled 2 times" in found, found
    assert "T1:T1-000002: the backend never journaled settlement's acknowledgement" in found, found
    data.acked = ["T1:T1-000001", "T1:T1-000002"]
    assert reconcile(data).discrepancies == []


# -- every game: the journal replayed, the timer's moves by cause, the turn games' pots ---------------


def _journal_of(events: list) -> object:
    """A journal (as :func:`tools.soak_judge.replay` reads one) holding ``events`` of table T1."""
    from dealer.edge.journal import JournalRow

    rows = [JournalRow(i, "T1", getattr(ev, "round_id", None), ev.type, ev.model_dump_json(), 0, "", "")
            for i, ev in enumerate(events, start=1)]

    class _Journal:
        journal_id = ""

        def rows(self, table_id=None, since_id=0):
            return iter(r for r in rows if table_id in (None, r.table_id))

    return _Journal()


def test_the_journal_replays_to_the_results_that_were_paid():
    from dealer.core.events import RulesChanged
    from dealer.core.rules import canonical_rules, software_version
    from tools.soak_judge import compare_results, replay

    cfg = TableConfig(id="T1", game="teen-patti", scanner={"kind": "serial", "port": "/dev/null", "reader_id": "R1"})
    text = canonical_rules(cfg)
    import hashlib

    events = [RulesChanged(rules=text, rules_hash=hashlib.sha256(text.encode()).hexdigest(),
                           software_version=software_version(), at=1),
              OpenRound(round_id="T1-000001", at=1, betting_closes_at=2),
              PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="10.00", at=1),
              CloseBetting(at=2), *[ScanRead(reader="R1", code=c, at=3) for c in DEAL]]
    rp = replay(_journal_of(events), ["T1"])
    assert rp.problems == [] and rp.refused == {} and list(rp.results) == ["T1:T1-000001"]
    paid = dict(rp.results)
    assert compare_results(rp.results, paid) == []
    other = paid["T1:T1-000001"].model_copy(update={"winner": "B"})
    assert compare_results(rp.results, {"T1:T1-000001": other}) == [
        "T1:T1-000001: the replayed result differs from the one applied in ['winner']"]
    assert compare_results(rp.results, {}) == ["T1:T1-000001: the journal replays to a result settlement never applied"]


def test_timer_moves_are_counted_by_cause_and_only_a_chosen_silence_is_fine():
    from tools.soak_judge import TimerMove, judge_timers

    moves = [TimerMove("S1", "r1", "action_timeout", "player2", 4, 10_000, 6000),  # left to the timer on purpose
             TimerMove("S1", "r1", "action_timeout", "player3", 5, 20_000, 6000),  # the broker died in its window
             TimerMove("S2", "r2", "action_timeout", "house-ai", 7, 40_000, 6000),  # nothing was down
             TimerMove("S3", "r3", "confirm_timeout", None, None, 50_000, 2000),  # the station's window, no outage
             TimerMove("S4", "r4", "decision_timeout", "player1", None, 60_000, 6000)]  # judged from the result
    found, causes = judge_timers(moves, {("S1", "player2", "r1", 4)}, [("broker_restart", 15_000, 15_400),
                                                                        ("disk_full", 70_000, 71_000)])
    assert causes == {"house:no_outage": 1, "player:no_outage": 1, "player:outage:broker": 1, "player_silent": 1,
                      "station:no_outage": 1}
    assert len(found) == 2, found
    assert found[0].startswith("S1:r1: the timer played player3's turn 5") and found[0].endswith("down: broker")
    assert found[1].startswith("S2:r2: the timer played house-ai's turn 7") and "no outage" in found[1]


def test_a_turn_game_hand_must_return_what_was_brought_less_the_rake():
    from tools.soak_judge import peer_money

    def stud(returned: dict[str, str], rake: str) -> RoundResult:
        return RoundResult.model_validate({
            "idempotency_key": "S1:r1", "table_id": "S1", "round_id": "r1", "game": "stud", "outcome": "COMPLETED",
            "refund_all": False, "accepted_bets": {"count": 2, "stakes": {"chips": "60.00"}, "bet_ids": ["a", "b"]},
            "money": {"currency": "EUR", "minor_unit": "0.01", "rounding": "DOWN"}, "opened_at": 1, "finished_at": 2,
            "player_bets": {p: {"chips": {"outcome": "WIN", "ratio": "0", "returned": v}} for p, v in returned.items()},
            "details": {"rake": rake, "total_pot": "20.00", "pots": [{"amount": "19.00"}]}})

    stakes = {"S1:r1": {"p1": Decimal("20.00"), "p2": Decimal("40.00")}}
    found, money = peer_money({"S1:r1": stud({"p1": "10.00", "p2": "49.00"}, "1.00")}, stakes)
    assert found == [] and money["rake"] == "1.00"
    found, _ = peer_money({"S1:r1": stud({"p1": "10.00", "p2": "49.50"}, "1.00")}, stakes)
    assert found == ["S1:r1: chips not conserved in the hand: 60.00 brought, 59.50 returned, 1.00 raked"]
