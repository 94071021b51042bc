"""The multi-node soak (``dealer soak --nodes N``): its judgments on planted journals, and a small
real run with every fault kind (nodes killed, paused past their lease and stopped, PostgreSQL
and the broker restarted) that must reconcile with no discrepancy."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import pytest

from dealer.edge.config import load_settings
from dealer.edge.journal import GENESIS
from tools.soak import register
from tools.soak_nodes import CHAOS_KINDS, plan_chaos, run_node_soak, write_node_config
from tools.soak_ownership import (
    EventRow,
    LeaseSeen,
    NodeFault,
    check_chains,
    check_ownership,
    failover_summary,
    failover_times,
)


def _chain(table: str, writes: list[tuple[str, int, float]]) -> list[EventRow]:
    """Rows of one table from (node, epoch, commit time), linked seq 1..n."""
    rows, prev = [], GENESIS
    for i, (node, epoch, at) in enumerate(writes, start=1):
        h = f"{table}-{i}".ljust(64, "0")
        rows.append(EventRow(i, table, i, node, epoch, "scan", None, prev, h, at))
        prev = h
    return rows


LEASES = [LeaseSeen("T1", 1, "node-1", 0.0, 0.01), LeaseSeen("T1", 2, "node-2", 10.0, 10.01)]


def test_ownership_passes_a_clean_handover():
    rows = _chain("T1", [("node-1", 1, 1.0), ("node-1", 1, 2.0), ("node-2", 2, 11.0), ("node-2", 2, 12.0)])
    found, stats = check_ownership(rows, LEASES)
    assert found == [] and check_chains(rows) == []
    assert stats["handovers_in_chains"] == 1 and stats["rows_checked_against_later_leases"] == 2


def test_ownership_reports_an_old_epoch_after_a_new_one_and_two_writers_of_one_epoch():
    rows = _chain("T1", [("node-1", 1, 1.0), ("node-2", 2, 11.0), ("node-1", 1, 11.5)])
    found, _ = check_ownership(rows, LEASES)
    assert any("seq 3 written by node-1 at epoch 1 after seq 2 of epoch 2" in d for d in found), found
    assert any("committed 1.490 s after a later epoch's lease had committed" in d for d in found), found
    rows = _chain("T1", [("node-1", 1, 1.0), ("node-3", 1, 2.0)])
    found, _ = check_ownership(rows, LEASES)
    assert "T1: epoch 1 written by 2 nodes: ['node-1', 'node-3']" in found, found
    assert "T1: epoch 1 was leased to node-1 but written by ['node-1', 'node-3']" in found, found


def test_ownership_reports_a_fenced_write_that_kept_the_chain_in_order():
    """A paused node that wrote after the takeover but before the new owner's first row: the
    chain alone looks fine (epochs go up); the commit time after the new lease's does not."""
    rows = _chain("T1", [("node-1", 1, 1.0), ("node-1", 1, 10.5), ("node-2", 2, 11.0)])
    found, _ = check_ownership(rows, LEASES)
    assert found == ["T1: seq 2 of epoch 1 (node-1) committed 0.490 s after a later epoch's lease had committed: "
                     "a fenced node wrote"], found


def test_chains_report_a_gap_and_a_broken_link():
    rows = _chain("T1", [("node-1", 1, 1.0)] * 4)
    gap = [r for r in rows if r.seq != 2]
    assert check_chains(gap) == ["T1: the chain skips from seq 1 to 3 (row id 3)"]
    broken = rows[:2] + [EventRow(3, "T1", 3, "node-1", 1, "scan", None, "f" * 64, "a" * 64, 1.0)]
    assert check_chains(broken) == ["T1: row seq 3 (id 3) does not link to seq 2"]


def test_failover_is_timed_to_the_next_epochs_first_row_or_its_lease():
    rows = _chain("T1", [("node-1", 1, 1.0), ("node-2", 2, 13.2)]) + _chain("T2", [("node-1", 4, 1.0)])
    leases = LEASES + [LeaseSeen("T2", 4, "node-1", 0.0, 0.0), LeaseSeen("T2", 5, "node-3", 12.5, 12.6),
                       LeaseSeen("T3", 1, "node-1", 0.0, 0.0)]
    faults = [NodeFault("node_kill", "node-1", 9.0, {"T1": 1, "T2": 4, "T3": 1})]
    expiries = {("T1", 1): 12.0, ("T2", 4): 12.0}  # T1 handed over before its lease ran out, T2 after
    failovers, found = failover_times(faults, rows, leases, expiries)
    by_table = {f.table_id: f for f in failovers}
    assert (by_table["T1"].seconds, by_table["T1"].measured_to, by_table["T1"].by) == (4.2, "first_row", "node-2")
    assert (by_table["T1"].lease_seconds, by_table["T1"].takeover) == (1.0, "released")
    assert (by_table["T2"].seconds, by_table["T2"].measured_to, by_table["T2"].by) == (3.5, "lease_acquired", "node-3")
    assert (by_table["T2"].lease_seconds, by_table["T2"].takeover) == (3.5, "expired")
    assert by_table["T3"].seconds is None
    assert found == ["T3: never taken over after node_kill of node-1 (it held epoch 1)"]
    summary = failover_summary(failovers)
    assert summary["count"] == 2 and summary["max"] == 4.2 and summary["never_taken_over"] == 1
    assert summary["per_kind"]["node_kill"]["count"] == 2 and summary["per_kind"]["node_pause"] == {"count": 0}
    assert summary["takeovers"]["node_kill"] == {"expired": 1, "released": 1}
    assert [(f["table"], f["seconds"], f["to_lease_acquired"]) for f in summary["slowest"]] == [("T1", 4.2, 1.0),
                                                                                             ("T2", 3.5, 3.5)]


def test_chaos_plan_has_a_node_kill_or_pause_every_few_faults_and_every_kind():
    for seed in range(20):
        plan = plan_chaos(random.Random(seed), 40, CHAOS_KINDS)
        first = 2 * (len(CHAOS_KINDS) - 2)
        assert set(plan[:first]) == set(CHAOS_KINDS), plan[:first]
        hits = [i for i, k in enumerate(plan) if k in ("node_kill", "node_pause")]
        assert hits[0] == 0 and max(b - a for a, b in zip(hits, hits[1:])) == 2
        assert abs(plan.count("node_kill") - plan.count("node_pause")) <= 1
    kinds = tuple(k for k in CHAOS_KINDS if k not in ("postgres_restart", "lease_move_in_rematch"))
    assert sorted(plan_chaos(random.Random(1), 4, kinds)) == ["broker_restart", "node_kill", "node_pause", "node_term"]


def test_node_config_loads(tmp_path: Path):
    path = write_node_config(tmp_path / "node-2.toml", node_id="node-2", journal_url="postgresql://postgres@127.0.0.1:5/soak",
                             broker_url="mqtt://127.0.0.1:1883", tables=[("S01", "R01", "teen-patti"),
                                                                         ("S02", "R02", "sevenluck")],
                             lease_seconds=3.0, betting_seconds=0.15, pause_seconds=0.05)
    settings = load_settings(path)
    assert settings.service.node_id == "node-2" and settings.service.journal_url.startswith("postgresql://")
    assert settings.cluster.lease_seconds == 3.0
    assert [t.scanner.kind for t in settings.tables] == ["mqtt", "mqtt"]
    assert settings.mqtt.client_id == "dealer-node-2"


def test_register_takes_the_multi_node_options():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["soak", "--nodes", "3", "--tables", "20", "--rounds", "200", "--lease-seconds", "3",
                              "--fault-every", "5"])
    assert (args.nodes, args.journal, args.lease_seconds, args.fault_every) == (3, None, 3.0, 5.0)


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_small_multi_node_soak_of_every_game_with_every_fault_kind_reconciles(tmp_path: Path):
    """3 nodes, one table of each of the five games, a fault every round: every kind at least
    once (a lease moved in the middle of a Seotda rematch among them); nothing lost, no table
    dealt by two nodes, no turn dealt twice, and every failover timed (2 s leases: the pauses are
    shorter)."""
    summary = await run_node_soak(nodes=3, tables=5, rounds=3, seed=3, workdir=tmp_path / "soak",
                                  lease_seconds=2.0, fault_every=1.0)
    assert summary["discrepancies"] == []
    assert summary["ok"] is True
    missing = [k for k in CHAOS_KINDS if summary["faults"][k] < 1]
    assert not missing, f"fault kinds never injected: {missing} ({summary['faults']})"
    # every table played the target (the soak ends only then; a stalled table is a discrepancy).
    # It used to ask for 12, which only says how long the chaos happened to last: it failed
    # once with 11 under a loaded machine, with nothing wrong.
    assert summary["rounds"]["min"] >= summary["rounds"]["target"] == 3
    assert summary["journal"]["commit_timestamps"] is True
    failover = summary["failover_s"]
    assert failover["count"] >= 3 and failover["never_taken_over"] == 0
    assert all(failover["per_kind"][k]["count"] >= 1
               for k in ("node_kill", "node_pause", "node_term", "lease_move_in_rematch"))
    assert summary["lease_moves_in_rematch"] and summary["seotda_asking_tables"] == ["S02"]
    games = summary["games"]
    assert sorted(games) == ["matgo", "seotda", "sevenluck", "stud", "teen-patti"]
    assert all(games[g]["completed"] >= 1 for g in games), games
    # the journal replays to the results paid (house AI moves included), no turn dealt twice (a
    # discrepancy), and the timer played for nobody but on purpose
    assert summary["replay"]["results"] == summary["results"] and summary["replay"]["house_moves"] > 0
    assert set(summary["timer_moves"]) <= {"player_silent"}, summary["timer_moves"]
    assert summary["ownership"]["handovers_in_chains"] >= 1
    assert summary["ownership"]["rows_checked_against_later_leases"] > 0
    assert summary["ownership"]["rows_checked_against_their_lease"] > 0
    rebalance = summary["rebalance_s"]  # every comeback counted: timed, cut short, or still open
    assert rebalance["count"] + rebalance["cut_short_by_next_fault"] + rebalance["unfinished_at_end"] >= 3
    assert any(p["taken_over_while_paused"] >= 1 for p in summary["pauses"]), summary["pauses"]
    assert all(p["old_lease_rows_after_resume"] == 0 for p in summary["pauses"])
    assert summary["chips"]["escrow"] == "0.00" and summary["chips"]["before"] == summary["chips"]["after"]
    assert summary["bets"]["placed"] == summary["bets"]["ledger_lines"] > 0
    assert summary["decisions"]["made"] > 0 and summary["decisions"]["by_timeout"] == 0
    assert summary["acks_journaled"] == summary["results"]


def test_ownership_reports_a_row_made_before_its_lease_was_taken():
    """Input that came in under epoch 1 and was applied after the node took the table again at
    epoch 2: its commit is in order, its event time is not."""
    rows = _chain("T1", [("node-1", 1, 1.0), ("node-2", 2, 11.0)])
    rows.append(EventRow(3, "T1", 3, "node-2", 2, "scan", None, rows[-1].hash, "c" * 64, 11.5, made=9.0))
    rows.append(EventRow(4, "T1", 4, "node-2", 2, "scan", None, "c" * 64, "d" * 64, 12.0, made=10.02))
    found, stats = check_ownership(rows, LEASES)
    assert found == ["T1: seq 3 (scan) of epoch 2 (node-2) was made 1.000 s before that lease was taken: input "
                     "of an earlier lease applied under this one"], found
    assert stats["rows_checked_against_their_lease"] == 2
