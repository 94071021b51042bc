"""``dealer simulate``: virtual shoes, dealers and players driving the tables of a ``dealer run`` config.

For each table of the config (or of ``--tables``) it plays every part a studio would have
around the backend, over the real broker, so that a hardware-in-the-loop rig can swap in one
real part at a time:

* **the shoe's reader**: for a serial table a pseudo-terminal, with the configured port path
  made a symlink to it (as udev names a USB-serial device); for an MQTT-scanner table it
  publishes as the table's scanner gateway. It speaks the backend's frame protocol, signed
  when the config gives the reader's key files (the simulated reader numbers its boots by the
  clock, so every run's boots are newer than the last run's).
* **the dealer**: a :class:`~simulators.station.VirtualDealer` who follows the station prompts,
  deals the game's deck over that reader and confirms ``WASH``/``SHUFFLE`` on the station topic.
* **the players**: a :class:`~simulators.bettors.Bettor` placing every round's bets (writing
  them into the bet book of ``--ledger``, which ``dealer settle --ledger`` settles from) and the
  game's players deciding or acting (:mod:`simulators.rig`).

Leave parts out: ``--no-players`` (a real player platform bets), ``--no-dealer TABLE`` (a real
shoe and dealer at TABLE: no PTY, no gateway), ``--no-station TABLE`` (a real ``dealer station``
confirms the steps at TABLE, the virtual dealer only deals). ``--rounds N`` stops once every
table has finished N rounds (the players bet in no later round); without it, it runs until
SIGTERM or SIGINT.

A port path that exists and is not a symlink to a pseudo-terminal (a real reader's device,
a file) is never replaced: that, a bad config, an unknown table or a broker not reachable in
time is one line on stderr and exit status 2. stdout carries JSON lines: ``started``, one
``round_finished`` per round, ``stopped`` with the totals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import structlog

from dealer.edge import topics
from dealer.cli.client_options import (BadInput, BrokerOptions, add_broker_options, broker_options, choose_tables,
                                   config_tables, start_bus, stop_on_signals, table_list)
from dealer.edge.config import Settings, TableConfig
from simulators.feed import events_of, prompts_of
from simulators.beetek import BeeTekFaultPlan, BeeTekShoe
from simulators.bettors import Bettor, table_plan
from simulators.pty_port import PtyPort
from simulators.rig import make_dealer, make_players
from simulators.settlement import open_ledger, remove_ledger
from simulators.shoe import FaultPlan, VirtualShoe
from simulators.station import DealerFaults, MqttShoeLink, PtyShoeLink, ShoeLink, StationScreen, VirtualDealer

log = structlog.get_logger("simulators.simulate")

LINE_FAULTS = ("garbage", "noread", "torn", "drop", "repeat")
FINISHED = {"round_result": "COMPLETED", "round_cancelled": "CANCELLED", "round_voided": "VOIDED"}


def port_refusal(path: str) -> str | None:
    """Why the simulator must not put its PTY at ``path``, or None. It replaces only its own
    kind of link: a symlink to a pseudo-terminal (``/dev/pts/N``, left by an earlier run)."""
    p = Path(path)
    if not p.parent.is_dir():
        return f"its directory {p.parent} does not exist"
    if not os.path.lexists(p):
        return None
    if not p.is_symlink():
        kind = "a directory" if p.is_dir() else "a device" if p.is_char_device() else "a file"
        return f"{path} exists and is {kind}, not a simulator's PTY symlink: refusing to replace it"
    target = os.readlink(p)
    if not target.startswith("/dev/pts/"):
        return f"{path} is a symlink to {target}, not to a pseudo-terminal: refusing to replace it"
    return None


@dataclass
class _Table:
    cfg: TableConfig
    port: PtyPort | None = None
    dealer: VirtualDealer | None = None
    screen: StationScreen | None = None
    players: list[Any] = field(default_factory=list)
    finished: dict[str, str] = field(default_factory=dict)  # round id -> outcome


class Simulation:
    """The simulated parts of ``tables`` (see the module docstring)."""

    def __init__(self, settings: Settings, tables: list[str], opts: BrokerOptions, *, rounds: int | None = None,
                 players: bool = True, no_dealer: frozenset[str] = frozenset(),
                 no_station: frozenset[str] = frozenset(), ledger: Path | None = None, seed: int | None = None,
                 fault_rate: float = 0.0, deal_interval: float = 0.05, client_id: str | None = None,
                 log_level: str = "warning", out: TextIO = sys.stdout) -> None:
        by_id = {t.id: t for t in settings.tables}
        self.tables = {tid: _Table(by_id[tid]) for tid in tables}
        self.opts, self.rounds, self.with_players = opts, rounds, players
        self.no_dealer, self.no_station = no_dealer, no_station
        self.ledger, self.fault_rate, self.deal_interval = ledger, fault_rate, deal_interval
        self.seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
        self.client_id = client_id or f"simulate-{uuid.uuid4().hex[:8]}"
        self.out, self.log_level = out, log_level
        self.all_done = asyncio.Event()
        self.dealer_failures = 0  # virtual dealers whose task failed (logged with the traceback)
        self.bettor: Bettor | None = None
        self.keys: dict[str, bytes | None] = {}

    # -- checks before anything is touched ------------------------------------------------

    def check(self) -> None:
        """Every refusal that needs no IO beyond reading: port paths, reader keys. BadInput."""
        from dealer.edge.keys import read_hex_key

        ports: dict[str, str] = {}
        for tid, t in self.tables.items():
            sc = t.cfg.scanner
            if sc.kind == "serial" and tid not in self.no_dealer:
                path = os.path.abspath(str(sc.port))
                if path in ports:
                    raise BadInput(f"tables {ports[path]} and {tid} name the same serial port {sc.port}")
                ports[path] = tid
        for tid, t in self.tables.items():
            if tid in self.no_dealer:
                continue
            sc = t.cfg.scanner
            if sc.kind == "serial":
                why = port_refusal(str(sc.port))
                if why:
                    raise BadInput(f"table {tid}: serial port {sc.port}: {why}")
            key = None
            if sc.hmac_key_files:
                try:
                    key = read_hex_key(Path(sc.hmac_key_files[0]), f"table {tid}: scanner {sc.reader_id}: HMAC key file")
                except ValueError as exc:
                    raise BadInput(str(exc)) from None
            self.keys[tid] = key

    # -- the parts -----------------------------------------------------------------------

    def _emit(self, line: dict[str, Any]) -> None:
        print(json.dumps(line, sort_keys=True), file=self.out, flush=True)

    def _on_event(self, topic: str, payload: bytes) -> None:
        if b'"round_' not in payload:
            return
        try:
            ev = json.loads(payload)
            tid, rid, outcome = ev["table_id"], ev["round_id"], FINISHED.get(ev["event"])
        except (ValueError, KeyError, TypeError):
            return
        t = self.tables.get(tid)
        if t is None or outcome is None or not isinstance(rid, str) or rid in t.finished:
            return
        t.finished[rid] = outcome
        self._emit({"event": "round_finished", "table_id": tid, "round_id": rid, "outcome": outcome,
                    "rounds": len(t.finished)})
        if self.rounds is not None and len(t.finished) >= self.rounds:
            if self.bettor is not None:
                self.bettor.stop_betting(tid)  # later rounds get no bets: no money left in a round we leave
            if all(len(x.finished) >= self.rounds for x in self.tables.values()):
                self.all_done.set()

    def _make_dealer(self, i: int, tid: str, t: _Table, bus: Any) -> None:
        sc = t.cfg.scanner
        key = self.keys.get(tid)
        beetek = sc.kind == "serial" and sc.protocol == "beetek"
        shoe: Any = BeeTekShoe() if beetek else VirtualShoe(sc.reader_id, key=key,
                                                             boot_count=int(time.time()) % 2**31 if key else 0)
        link: ShoeLink
        if sc.kind == "serial":
            directory, name = os.path.split(str(sc.port))
            try:
                t.port = PtyPort(directory or ".", name)
            except OSError as exc:  # e.g. no permission to write in the port's directory
                raise BadInput(f"table {tid}: cannot put a PTY at {sc.port}: {exc.strerror or exc}") from None
            link = PtyShoeLink(t.port)
        else:
            link = MqttShoeLink(bus, tid)
        p = self.fault_rate / (len(LINE_FAULTS) + 2)
        faults: Any = FaultPlan(**{f: p for f in LINE_FAULTS}) if p else FaultPlan()
        if beetek:  # the shoe's own faults (no repeat: a Bee-Tek line repeat looks like a second pass)
            faults = BeeTekFaultPlan(**{f: p for f in ("failed", "alarm", "warning", "garbage", "split", "joined")})
        # a Bee-Tek shoe reads only the 52 standard cards: a foreign card is not a mistake it can report
        mistakes = DealerFaults(foreign=0.0 if beetek else p, duplicate=p)

        async def leave_to_station(payload: bytes) -> None:
            return None  # a real station confirms the steps here: the virtual dealer only deals

        actions = leave_to_station if tid in self.no_station else None
        t.dealer = make_dealer(t.cfg.game, tid, shoe, link, rng=random.Random(self.seed * 7919 + i), faults=faults,
                               dealer_faults=mistakes, deal_interval=self.deal_interval,
                               heartbeat_interval=min(0.5, sc.heartbeat_timeout / 4), patience=2.0, actions=actions)
        if actions is None:  # it confirms on the table's station topic, through this connection
            topic = topics.station(tid)

            async def confirm(payload: bytes) -> None:
                await bus.publish(topic, payload, qos=1)

            t.dealer.actions = confirm
        t.screen = StationScreen(t.dealer)
        bus.subscribe(topics.state(tid), prompts_of(t.screen.on_prompt))

    async def run(self) -> dict[str, Any]:
        self.check()
        book: sqlite3.Connection | None = None
        new_ledger = self.ledger is not None and not self.ledger.exists()
        if self.with_players:
            try:
                book = open_ledger(self.ledger if self.ledger is not None else ":memory:")
            except sqlite3.Error as exc:
                raise BadInput(f"--ledger {self.ledger}: cannot be opened: {exc}") from None
        # one connection for every part; the current prompt and table state may be retained
        bus = self.opts.bus(self.client_id, accept_retained=True)
        tasks: list[asyncio.Task[Any]] = []
        try:
            for i, (tid, t) in enumerate(self.tables.items()):
                bus.subscribe(topics.state(tid), events_of(self._on_event))
                bus.subscribe(topics.events(tid), self._on_event)  # refusals
                if tid not in self.no_dealer:
                    self._make_dealer(i, tid, t, bus)
            if book is not None:
                plans = {tid: table_plan(t.cfg) for tid, t in self.tables.items()}
                self.bettor = Bettor(bus, book, plans, random.Random(self.seed + 1))
                for i, (tid, t) in enumerate(self.tables.items()):
                    t.players = make_players(t.cfg.game, tid, bus, plans[tid].players,
                                             rng=random.Random(self.seed + 2 + i))
            try:
                bus_task = await start_bus(bus, self.opts.connect_timeout)
            except BadInput:
                if book is not None and new_ledger and self.ledger is not None:
                    book.close()
                    book = None
                    remove_ledger(self.ledger)  # a refused start leaves nothing behind
                raise
            tasks.append(bus_task)
            from dealer.edge.logs import configure_logging

            configure_logging(self.log_level)  # the bounded wait's retries stayed quiet: from now on, the logs
            self._emit({"event": "started", "seed": self.seed, "broker": self.opts.url, "tables": {
                tid: {"game": t.cfg.game, "reader": t.cfg.scanner.kind if tid not in self.no_dealer else "real",
                      "port": t.port.path if t.port else None, "dealer": tid not in self.no_dealer,
                      "confirms": tid not in self.no_dealer and tid not in self.no_station,
                      "players": len(t.players) if self.with_players else 0, "bets": self.with_players}
                for tid, t in self.tables.items()},
                "ledger": str(self.ledger) if self.ledger and self.with_players else None})
            if self.with_players and self.ledger is None:
                log.warning("bets are placed but recorded in no ledger: give --ledger FILE (the one dealer settle "
                            "uses) for settlement to settle them")
            tasks += [asyncio.create_task(self._dealer(tid, t.dealer)) for tid, t in self.tables.items()
                      if t.dealer is not None]
            stop = stop_on_signals()
            waiters = [asyncio.create_task(self.all_done.wait()), asyncio.create_task(stop.wait())]
            await asyncio.wait(waiters + [bus_task], return_when=asyncio.FIRST_COMPLETED)
            for w in waiters:
                w.cancel()
            if self.bettor is not None:
                await self.bettor.drain()  # bets in flight reach the broker first
            return self._summary()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for t in self.tables.values():
                if t.port is not None:
                    t.port.close()  # the symlink goes with it
            if book is not None:
                book.close()

    async def _dealer(self, tid: str, dealer: VirtualDealer) -> None:
        """A virtual dealer's task: one that fails says so (and its table stops dealing)
        instead of vanishing while the rest of the rig runs on."""
        try:
            await dealer.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("virtual dealer failed: the table is no longer dealt", table_id=tid)
            self.dealer_failures += 1

    def _summary(self) -> dict[str, Any]:
        faults: Counter[str] = Counter()
        for t in self.tables.values():
            if t.dealer is not None:
                faults.update(t.dealer.faults_injected)
        summary = {"event": "stopped", "seed": self.seed,
                   "rounds": {tid: len(t.finished) for tid, t in self.tables.items()},
                   "outcomes": dict(Counter(o for t in self.tables.values() for o in t.finished.values())),
                   "bets_sent": self.bettor.bets_sent if self.bettor else 0,
                   "bets_not_sent": self.bettor.bets_failed if self.bettor else 0,
                   "faults_injected": dict(faults), "dealer_failures": self.dealer_failures,
                   "stale_prompts_dropped": sum(t.screen.dropped for t in self.tables.values() if t.screen)}
        self._emit(summary)
        return summary


def _simulation(args: argparse.Namespace) -> Simulation:
    if args.rounds is not None and not 1 <= args.rounds <= 1_000_000:
        raise BadInput(f"--rounds {args.rounds}: give a number of rounds from 1 (or leave it out: until stopped)")
    if not 0 <= args.faults <= 1:
        raise BadInput(f"--faults {args.faults:g}: give a probability from 0 to 1")
    if not 0 <= args.deal_interval <= 60:
        raise BadInput(f"--deal-interval {args.deal_interval:g}: give 0 to 60 seconds")
    settings, known = config_tables(args.config)
    tables = choose_tables(table_list(args.tables), known, args.config)
    no_dealer = _names(args.no_dealer, "--no-dealer", tables)
    no_station = _names(args.no_station, "--no-station", tables)
    m = settings.mqtt
    opts = broker_options(args, default_url=m.url, default_ca=m.ca_file)
    ledger = Path(args.ledger) if args.ledger else None
    if ledger is not None and (ledger.is_dir() or not ledger.parent.is_dir()):
        raise BadInput(f"--ledger {ledger}: " + ("is a directory" if ledger.is_dir()
                                                 else f"the directory {ledger.parent} does not exist"))
    return Simulation(settings, tables, opts, rounds=args.rounds, players=not args.no_players, no_dealer=no_dealer,
                      no_station=no_station, ledger=ledger, seed=args.seed, fault_rate=args.faults,
                      deal_interval=args.deal_interval, client_id=args.client_id, log_level=args.log_level)


def _names(values: list[str], option: str, tables: list[str]) -> frozenset[str]:
    out: list[str] = []
    for v in values:
        out += table_list(v, option)
    unknown = [t for t in out if t not in tables]
    if unknown:
        raise BadInput(f"{option}: unknown table{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                       f"(simulated tables: {', '.join(tables)})")
    return frozenset(out)


def _cmd_simulate(args: argparse.Namespace) -> int:
    from dealer.edge.logs import configure_logging

    configure_logging("error")  # until the broker answers: a bounded wait, then one line

    async def main() -> None:
        await _simulation(args).run()

    try:
        asyncio.run(main())
    except BadInput as exc:
        print(f"dealer simulate: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the parts ran (afterwards SIGINT stops them and exits 0)
        return 130
    return 0


def register(sub: Any) -> argparse.ArgumentParser:
    """Add ``dealer simulate`` to the ``dealer`` command's subparsers."""
    p = sub.add_parser("simulate", help="virtual shoes, dealers and players driving the tables of a dealer run "
                       "config over the real broker; leave parts out to swap in real ones",
                       description="Virtual shoes, dealers and players driving the tables of a dealer run config "
                                   "over the real broker: leave parts out (--no-players, --no-dealer, --no-station) "
                                   "to swap in real ones. stdout carries JSON lines: started, one round_finished "
                                   "per round, stopped with the totals.")
    p.add_argument("--config", required=True, metavar="FILE", help="the TOML config that dealer run runs")
    p.add_argument("--tables", metavar="T1,T2", help="simulate these tables only (default: every table of --config)")
    p.add_argument("--rounds", type=int, metavar="N",
                   help="stop once every simulated table has finished N rounds (default: run until stopped)")
    p.add_argument("--no-players", action="store_true",
                   help="no bets and no player decisions or actions (a real player platform plays)")
    p.add_argument("--no-dealer", action="append", default=[], metavar="TABLE",
                   help="no virtual shoe or dealer at TABLE (a real shoe and dealer are there); repeatable or T1,T2")
    p.add_argument("--no-station", action="append", default=[], metavar="TABLE",
                   help="the virtual dealer at TABLE deals but leaves the WASH/SHUFFLE confirmations to a real "
                        "dealer station; repeatable or T1,T2")
    p.add_argument("--ledger", metavar="FILE",
                   help="record every bet in this ledger's bet book before sending it: the file that dealer "
                        "settle --ledger settles from")
    p.add_argument("--seed", type=int, metavar="N", help="seed of the shuffles, bets and faults (default: random, printed)")
    p.add_argument("--faults", type=float, default=0.0, metavar="P",
                   help="chance per card pass of a reader line fault (garbage, no-read, torn, dropped, repeated "
                        "frame) or a dealer mistake (foreign, duplicate card); default 0")
    p.add_argument("--deal-interval", type=float, default=0.05, metavar="SECONDS",
                   help="how long the virtual dealer takes per card (default 0.05)")
    add_broker_options(p, default_note="the [mqtt] url of --config (never its credentials)")
    p.add_argument("--client-id", metavar="ID", help="MQTT client id (default: simulate-<random>)")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="level of the JSON logs on stderr (default warning)")
    p.set_defaults(func=_cmd_simulate)
    return p


__all__ = ["Simulation", "port_refusal", "register"]
