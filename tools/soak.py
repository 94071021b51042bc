"""``dealer soak``: K tables for M rounds under random faults, then a full reconciliation.

Everything is real except the people and the hardware: one private Mosquitto (persistence
on), the real ``dealer run`` process started from a TOML config with K tables of the five
games in turn (``--games all``: Seven-Card Stud, Seotda, Matgo, Sevenluck, Teen Patti;
:mod:`tools.soak_games`) on K serial scanners (PTYs), K virtual dealers following the station
prompts through a faulty line (garbage, no-reads, torn and dropped frames, retransmissions) and
making mistakes (foreign and duplicate cards), the games' steady players
(:mod:`tools.soak_players`; the house AI plays Matgo in the backend's worker process), and the
reference settlement consumer placing the bets of every round (the turn games' players' chips
and cover) and applying every result once into its SQLite ledger.

A chaos task injects, at random moments spread over the run, in shuffled rotation:

* ``broker_restart``: Mosquitto SIGKILLed and started again on the same port;
* ``reader_unplug``: one table's reader unplugged, replugged (a new PTY behind the same
  symlink) and powered up again (BOOT);
* ``backend_kill``: the backend SIGKILLed and restarted (journal replay);
* ``link_loss_before_close``: the broker killed right after a ``round_opened`` event (and
  the first accepted bet, if one comes quickly): that round must be CANCELLED and refunded;
* ``link_loss_after_close``: the broker killed while a table is DEALING: that round must
  complete, and its result arrives after the broker is back;
* and the kinds ``docs/soak.md`` lists: the backend down past a decision or turn window, the
  house worker killed mid-decision, the broker lost in the stud exposure window, settlement down
  or slow, a full disk, clock steps, an oversize round.

The simulated people use MQTT as they should: settlement reads results over a persistent
session (nothing may be missed) but round events and bets as live traffic, bettors bet
once per round and only while its betting is open, and a dealer station's screen shows
the newest prompt, never an older one redelivered by a crashed broker.

When every table has at least M results applied by the consumer (and every planned chaos
event happened) the soak stops opening rounds (the backend reloads its config with
``auto_rounds = false``: SIGHUP), waits until every opened round's result has been delivered and
applied, stops everything and reconciles (:func:`reconcile`):

* every round the backend opened (its journal) has exactly one applied result, and
  nothing is left in the outbox;
* every delivery of a result carried the same bytes (at-least-once, never different);
* every bet the consumer placed has exactly one ledger line (settled, REFUND or
  NOT_ACCEPTED) with the amount :func:`dealer.core.settlement.settle_bet` gives; cancelled and
  voided rounds only refund;
* chips are conserved: players' bankrolls + house + escrow before == after, with nothing
  left in escrow; each turn game's hand returns the chips brought less its rake;
* the journal replays through the core to the results paid, and every timer move has a cause
  (:mod:`tools.soak_judge`): only a turn a player left on purpose may be played by the timer;
* every CANCELLED round was cancelled by a link loss before its betting closed (its
  reason, no ``closed_at``, and no ``close_betting`` in the journal), every round hit by a
  link loss after betting closed COMPLETED, and no round was VOIDED (nobody voids here).

The summary is one JSON object (``dealer soak`` prints it with sorted keys and exits 1 on
any discrepancy).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from simulators.station import StationScreen
from tools.soak_faults import CHAOS_KINDS, FAULT_KINDS
from tools.soak_games import GAME_CHOICES
from tools.soak_parts import scan_backend_log
from tools.soak_reconcile import SoakData, reconcile
from tools.soak_run import _Soak, write_config

#: The dealer station's screen (newest prompt only) lives with the virtual dealer now.
_StationScreen = StationScreen


async def run_soak(tables: int, rounds: int, seed: int, workdir: Path, fault_rate: float, *,
                   card_fault_rate: float | None = None, betting_seconds: float = 0.15, pause_seconds: float = 0.05,
                   deal_interval: float = 0.005, max_seconds: float = 3600.0, stall_seconds: float = 90.0,
                   drain_seconds: float = 120.0, games: str = "all", decision_seconds: float = 6.0,
                   action_seconds: float = 6.0, silent_rate: float = 0.01) -> dict[str, Any]:
    """Run the soak and return its summary (see the module docstring).

    ``fault_rate`` sets both the number of chaos events (``ceil(fault_rate * tables *
    rounds)``, at least one of each kind when > 0) and, unless ``card_fault_rate`` is
    given, the probability per card pass of a reader line fault or dealer mistake, split
    evenly over garbage, noread, torn, drop, repeat, foreign and duplicate.
    """
    soak = _Soak(tables, rounds, seed, Path(workdir), fault_rate, card_fault_rate=card_fault_rate,
                 betting_seconds=betting_seconds, pause_seconds=pause_seconds, deal_interval=deal_interval,
                 max_seconds=max_seconds, stall_seconds=stall_seconds, drain_seconds=drain_seconds,
                 games=games, decision_seconds=decision_seconds, action_seconds=action_seconds,
                 silent_rate=silent_rate)
    return await soak.run()


# ---------------------------------------------------------------------------------------------
# dealer soak
# ---------------------------------------------------------------------------------------------


def _cmd_soak(args: argparse.Namespace) -> int:
    from dealer.cli.args import fail
    from dealer.edge.logs import configure_logging
    from dealer.edge.runner import run_loop

    if args.workdir:  # never into a directory that holds anything: the soak writes, mounts and deletes there
        wd = Path(args.workdir)
        if wd.exists() and not wd.is_dir():
            return fail("dealer soak", f"--workdir {wd} is not a directory")
        if wd.is_dir() and any(wd.iterdir()):
            return fail("dealer soak", f"--workdir {wd} is not empty: give a new or empty directory")
    nodes = getattr(args, "nodes", 1)
    if nodes < 2 and getattr(args, "journal", None) is not None:
        return fail("dealer soak", "--journal is for the multi-node soak: give --nodes 2 or more")
    if nodes >= 2:
        from tools import soak_nodes

        journal = args.journal or "auto"
        if journal != "auto":
            why = soak_nodes.check_journal_url(journal)
            if why is not None:
                return fail("dealer soak", why)
    configure_logging(args.log_level)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="dealer-soak-"))
    if nodes >= 2:
        summary = run_loop(soak_nodes.run_node_soak(
            nodes, args.tables, args.rounds, args.seed, workdir, journal=journal, lease_seconds=args.lease_seconds,
            fault_every=args.fault_every,
            card_fault_rate=args.fault_rate if args.card_fault_rate is None else args.card_fault_rate,
            betting_seconds=args.betting_seconds, max_seconds=args.max_seconds, games=args.games,
            decision_seconds=args.decision_seconds, chaos=args.fault_every > 0, node_log_level=args.node_log_level,
            action_seconds=args.action_seconds, silent_rate=args.silent_rate))
        print(json.dumps(summary, sort_keys=True))
        return 0 if summary["ok"] else 1
    summary = run_loop(run_soak(args.tables, args.rounds, args.seed, workdir, args.fault_rate,
                                card_fault_rate=args.card_fault_rate, betting_seconds=args.betting_seconds,
                                max_seconds=args.max_seconds, games=args.games,
                                decision_seconds=args.decision_seconds, action_seconds=args.action_seconds,
                                silent_rate=args.silent_rate))
    print(json.dumps(summary, sort_keys=True))
    return 0 if summary["ok"] else 1


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``dealer soak`` to the ``dealer`` command's subparsers."""
    from dealer.cli.args import fraction, int_range, seconds

    p = subparsers.add_parser("soak", help="K tables x M rounds against the real backend process with random "
                              "faults, then reconcile results, bets and chips (JSON summary; exit 1 on a discrepancy)")
    p.add_argument("--tables", type=int_range(1, 1000), default=2, metavar="K", help="tables in the backend (default 2)")
    p.add_argument("--rounds", type=int_range(1, 1_000_000), default=20, metavar="M",
                   help="results per table before the soak winds down")
    p.add_argument("--seed", type=int, default=1, help="seed of every random choice (faults, cards, bets; default 1)")
    p.add_argument("--fault-rate", type=fraction, default=0.06,
                   help="chaos events per round played (broker restarts, reader unplugs, backend kills, link "
                        "losses before and after betting closes, in rotation) and, unless --card-fault-rate is "
                        "given, the chance per card pass of a line fault or dealer mistake")
    p.add_argument("--card-fault-rate", type=fraction, default=None,
                   help="the chance per card pass of a line fault or dealer mistake (default: --fault-rate)")
    p.add_argument("--betting-seconds", type=seconds(0, 3600), default=0.15, help="betting window of each round "
                   "(default 0.15)")
    p.add_argument("--games", default="all", choices=list(GAME_CHOICES),
                   help="all (default): the five games in turn (stud, Seotda, Matgo, Sevenluck, Teen Patti; every "
                        "second Seotda table asks 9-4 rematches and re-entries); mixed: Sevenluck and Teen Patti; "
                        "or one game at every table")
    p.add_argument("--decision-seconds", type=seconds(0, 3600), default=6.0,
                   help="Sevenluck decision window (its players answer within 0.3 s: a load margin)")
    p.add_argument("--action-seconds", type=seconds(0, 3600), default=6.0,
                   help="turn window of stud, Seotda and Matgo (their players answer within 0.2 s)")
    p.add_argument("--silent-rate", type=fraction, default=0.01,
                   help="share of turns a player leaves to the timer on purpose (counted as player_silent; any "
                        "other timer move on a player's turn is a discrepancy)")
    p.add_argument("--max-seconds", type=seconds(0, 30 * 86_400), default=3600.0,
                   help="give up (and report it) after this long")
    p.add_argument("--nodes", type=int_range(1, 16), default=1, metavar="N",
                   help="backend nodes; 2 or more: the multi-node soak (tools/soak_nodes.py): nodes share a "
                        "PostgreSQL journal and own the tables by lease, while nodes are killed, paused past their "
                        "lease and stopped, and PostgreSQL and the broker restart (default 1)")
    p.add_argument("--journal", metavar="URL|auto", default=None,
                   help="with --nodes: the PostgreSQL journal, an empty database at postgresql://..., or 'auto' "
                        "(default): a private server the soak also kills and restarts (with a URL it cannot, and "
                        "skips postgres_restart)")
    p.add_argument("--lease-seconds", type=seconds(1, 300, allow_low=True), default=3.0,
                   help="with --nodes: each node's [cluster] lease_seconds (default 3; failover target 5 s)")
    p.add_argument("--fault-every", type=seconds(0, 1_000_000, allow_low=True, unit="rounds"), default=4.0, metavar="R",
                   help="with --nodes: one fault every R rounds per table, every second one a node kill or pause, "
                        "the others node stops, PostgreSQL and broker restarts in turn (default 4; 0: no chaos)")
    p.add_argument("--node-log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="with --nodes: each node's log_level (its log is node-N.log in the workdir; default warning)")
    p.add_argument("--workdir", help="a new or empty directory for the broker, journal, ledger and logs "
                                     "(default: a fresh temporary directory, kept)")
    p.add_argument("--log-level", default="error", choices=["debug", "info", "warning", "error"],
                   help="level of the soak's own JSON log lines on stderr (default error)")
    p.set_defaults(func=_cmd_soak)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.soak")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["soak", *(argv if argv is not None else sys.argv[1:])])
    return int(args.func(args))


__all__ = ["CHAOS_KINDS", "FAULT_KINDS", "SoakData", "reconcile", "register", "run_soak", "scan_backend_log",
           "write_config"]


if __name__ == "__main__":
    raise SystemExit(main())
