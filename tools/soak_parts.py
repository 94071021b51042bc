"""What both soaks (``dealer soak`` on one node, ``tools/soak.py``, and on N nodes,
``tools/soak_nodes.py``) are made of: the backend process, its tables' TOML, the settlement
consumer, the Sevenluck players, the virtual dealers, the event waiters and the backend log's
scan. Neither soak imports the other; both import this."""

from __future__ import annotations

import asyncio
import json
import os
import math
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dealer.edge import topics
from dealer.core.events import PlaceBet
from drivers.bus import BusError
from drivers.mqtt import MqttBus
from simulators.bettors import BetPlan
from simulators.players import VirtualPlayer
from simulators.procs import die_with_parent
from simulators.rig import make_dealer
from simulators.settlement import SettlementConsumer
from simulators.shoe import VirtualShoe
from simulators.station import VirtualDealer
from tools.soak_games import SHUFFLERS, TURN_GAMES, TableSpec, peer_plan, toml_options
from tools.soak_players import make_soak_players


#: Line faults of the reader, per pass of a card (``simulators.shoe.FaultPlan``).
LINE_FAULTS = ("garbage", "noread", "torn", "drop", "repeat")
#: Dealer mistakes, per card dealt (``simulators.station.DealerFaults``), as the dealer counts them.
DEALER_FAULTS = ("foreign_card", "duplicate_card")


MAX_LISTED = 200
SEVENLUCK_SEATS = 3


#: Betting period of a turn game's table: its players sit down with a bet (their chips), and
#: one who sits too late is not dealt in.
PEER_BETTING_SECONDS = 1.0
#: The least turn window of a Matgo table (see :func:`matgo_windows`).
MATGO_ACTION_SECONDS = 10.0
#: How long a dealer station waits for the broker's acknowledgement of a confirmation before
#: it may confirm again (a send into a dying connection waits for the client's 10 s timeout).
CONFIRM_SEND_SECONDS = 1.0


def table_ids(n: int) -> list[tuple[str, str]]:
    """(table id, reader id) per table."""
    width = max(2, len(str(n)))
    return [(f"S{i:0{width}d}", f"R{i:0{width}d}") for i in range(1, n + 1)]


def table_toml(tid: str, game: str, scanner: str, *, betting_seconds: float, pause_seconds: float,
               auto_rounds: bool, decision_seconds: float, action_seconds: float,
               options: dict[str, dict[str, Any]] | None, betting_overrides: dict[str, float] | None,
               action_overrides: dict[str, float] | None) -> str:
    """One ``[[tables]]`` block of a soak backend's TOML, with its ``options`` (default:
    Sevenluck's seats) and ``scanner`` (the ``[tables.scanner]`` lines, each ending in a newline)."""
    opts = (options or {}).get(tid, {"seats": SEVENLUCK_SEATS} if game == "sevenluck" else {})
    return f"""
[[tables]]
id = "{tid}"
game = "{game}"
betting_seconds = {(betting_overrides or {}).get(tid, betting_seconds)}
pause_seconds = {pause_seconds}
auto_rounds = {'true' if auto_rounds else 'false'}
decision_seconds = {decision_seconds}
action_seconds = {(action_overrides or {}).get(tid, action_seconds)}
""" + toml_options(opts) + """
[tables.scanner]
""" + scanner


def write_toml(path: Path, parts: list[str]) -> Path:
    """Write a config whole (a reader never sees half of one)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(parts))
    tmp.replace(path)
    return path


_FD_CALLBACK = re.compile(r"^Exception in callback .*\b(add|remove)_(reader|writer)\b")


#: Loggers of our own code: an exception they log was caught and handled where it happened.
_OWN_LOGGERS = ("dealer.", "drivers.", "simulators.")


def scan_backend_log(text: str) -> dict[str, int]:
    """Count the tracebacks in the backend's stderr.

    The backend logs JSON lines (dealer/edge/logs.py): an exception is a line with an
    ``exception`` field. One our own code logged (logger ``dealer.*``, ``drivers.*``) was
    handled where it happened; any other (asyncio's "Task exception was never retrieved",
    an ``uncaught`` one, a library's) counts, as does a plain ``Traceback`` (a log written
    before every line was JSON, or a crash below Python's logging).

    One kind is reported apart, not as a fault of the backend: an event-loop callback
    that registers a socket the MQTT client has just closed (``Exception in callback
    Loop.add_writer``, EBADF) when the broker vanishes mid-write. It is logged by the
    loop's default handler, and the client reconnects as it should.
    """
    tracebacks = fd_races = pools = 0
    benign = False
    for line in text.splitlines():
        if "house worker died: pool replaced" in line:
            pools += 1
        if line.startswith("{"):
            benign = False
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict) or not rec.get("exception"):
                continue
            if _FD_CALLBACK.match(str(rec.get("event", ""))):
                fd_races += 1
            elif not str(rec.get("logger", "")).startswith(_OWN_LOGGERS):
                tracebacks += 1
        elif _FD_CALLBACK.match(line):
            benign, fd_races = True, fd_races + 1
        elif line.startswith("Traceback") and not benign:
            tracebacks += 1
            benign = True  # a chained exception's second traceback is the same incident
    out = {"tracebacks": tracebacks, "loop_fd_races": fd_races}
    if pools:
        out["house_pools_replaced"] = pools
    return out



Waiter = tuple[Callable[[dict[str, Any]], bool], "asyncio.Future[dict[str, Any]]"]


async def wait_event(waiters: list[Waiter], pred: Callable[[dict[str, Any]], bool],
                     timeout: float) -> dict[str, Any] | None:
    """The first event heard that ``pred`` accepts (the hearer resolves ``waiters``), or None
    after ``timeout`` seconds."""
    fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    entry = (pred, fut)
    waiters.append(entry)
    try:
        async with asyncio.timeout(timeout):
            return await fut
    except TimeoutError:
        return None
    finally:
        waiters.remove(entry)


class SplitBus:
    """The settlement consumer's view of two MQTT sessions: results through a persistent
    one (``durable``), everything else (round events in, bets out) through ``live``."""

    name = "broker"

    def __init__(self, *, durable: MqttBus, live: MqttBus) -> None:
        self.durable, self.live = durable, live

    @property
    def connected(self) -> bool:
        return self.live.connected

    def subscribe(self, pattern: str, handler: Callable[[str, bytes], None]) -> None:
        (self.durable if pattern.endswith("/results") else self.live).subscribe(pattern, handler)

    def on_connection(self, listener: Callable[[bool, str], None]) -> None:
        self.live.on_connection(listener)

    async def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> None:
        await self.live.publish(topic, payload, qos=qos, retain=retain)

    async def run(self) -> None:  # the soak runs both sessions itself
        raise NotImplementedError


@dataclass
class SoakConsumer(SettlementConsumer):
    """The reference consumer, betting like a person would: once per round, and only while
    its betting is open.

    A ``round_opened`` event can arrive twice (QoS 1) or late (a loaded broker; over a
    persistent session, a crashed broker redelivers what it had not saved as acknowledged,
    long after the round ended). The reference consumer would bet again on such a round
    with new bet ids, and when the round's result was already applied those bets would
    never be settled. Such openings are counted and ignored here.
    """

    games: dict[str, str] = field(default_factory=dict)  # table -> game (bets differ by game)
    plans: dict[str, BetPlan] = field(default_factory=dict)  # turn games' tables: their players' chips

    def __post_init__(self) -> None:
        super().__post_init__()
        self.stale_openings = 0
        self.clock_offset_ms = 0  # how far the backend's wall clock is ahead (the soak's clock_step)
        self.step_at = -math.inf  # when the backend's clock last stepped
        self.slow_until = 0.0  # settlement_slow: acknowledgements wait 1..5 s until then
        self.slow_acks = 0
        self.opening_lag_ms: list[float] = []  # round_opened: backend stamp to arrival here
        self._bet_rounds: set[str] = set()

    def _on_event(self, topic: str, payload: bytes) -> None:
        if b'"round_opened"' not in payload:
            return  # the only event the consumer acts on
        ev = json.loads(payload)
        if ev.get("event") != "round_opened":
            return
        rid = str(ev.get("round_id"))
        now_ms = time.time() * 1000 + self.clock_offset_ms
        if isinstance(ev.get("at"), int) and time.monotonic() > self.step_at + 5:  # not across a clock step
            self.opening_lag_ms.append(now_ms - ev["at"])
        closes_at = (ev.get("data") or {}).get("betting_closes_at")
        applied = self.db.execute("SELECT 1 FROM applied WHERE key = ?", (f"{ev.get('table_id')}:{rid}",)).fetchone()
        if rid in self._bet_rounds or applied or (closes_at is not None and closes_at <= now_ms):
            self.stale_openings += 1
            return
        self._bet_rounds.add(rid)
        self.game = self.games.get(str(ev.get("table_id")), "teen-patti")
        super()._on_event(topic, payload)


    def _bet_plan(self, table_id: str) -> BetPlan:
        plan = self.plans.get(table_id)
        return plan if plan is not None else super()._bet_plan(table_id)

    def _acknowledge(self, table_id: str, key: str, round_id: str) -> None:
        if time.monotonic() >= self.slow_until:
            super()._acknowledge(table_id, key, round_id)
            return
        self.slow_acks += 1
        asyncio.get_running_loop().call_later(self.rng.uniform(1.0, 5.0), SettlementConsumer._acknowledge, self,
                                              table_id, key, round_id)

    async def place_many(self, table_id: str, round_id: str, n: int, per_second: float, id_length: int = 60) -> int:
        """``n`` Teen Patti bets in one round from high-rollers, at ``per_second`` (each bet in
        the bet book first, like every bet here); returns how many were handed to the broker."""
        self._bet_rounds.add(round_id)
        sent = 0
        loop = asyncio.get_running_loop()
        start = loop.time()
        pending: set[asyncio.Task[None]] = set()

        async def one(bet: PlaceBet) -> None:
            nonlocal sent
            try:
                await self.bus.publish(topics.actions(table_id),
                                       bet.model_dump_json(exclude={"at"}, exclude_none=True).encode(), qos=1)
                sent += 1
            except BusError:
                pass

        for i in range(n):
            self._bet_seq += 1
            bet_id = f"{round_id}-x{self._bet_seq}-".ljust(id_length, "p")
            bet = PlaceBet(bet_id=bet_id, player_id=f"whale{i % 200}", bet_type=self.rng.choice(self.bet_types),
                           stake=self.rng.choice(self.stakes), round_id=round_id, command_id=bet_id)
            self.db.execute("INSERT OR IGNORE INTO bets VALUES (?, ?, ?, ?, ?, ?)",
                            (bet.bet_id, round_id, bet.player_id, bet.bet_type, str(bet.stake), None))
            task = asyncio.create_task(one(bet))
            pending.add(task)
            task.add_done_callback(pending.discard)
            await asyncio.sleep(max(0.0, start + (i + 1) / per_second - loop.time()))
        await asyncio.gather(*pending)
        return sent


class SoakPlayer(VirtualPlayer):
    """A Sevenluck player who always answers, after thinking for a while (well within the
    window), and sends its decision again while its own link is down (for 5 s, the same
    command id): a decision the timer makes in this soak was made because of an outage.

    It decides when told on its own topic (``decision_required``, again after a resume), when
    the public ``decisions_open`` lists it (its private message may be lost with a crashed
    broker's queue, as a real client would notice from the table's public state), and from its
    retained private state (``players/{player}/state``) when that shows a decision still open
    for it with a window it has not answered yet, as a real client reads after a reconnect (a
    renewed window published while its own link was down is in no live message it receives)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._answered_windows: set[tuple[str, object]] = set()
        self.bus.subscribe(topics.player_state(self.table_id, self.player_id), self._on_state)

    def _on_state(self, topic: str, payload: bytes) -> None:
        if not payload:
            return  # cleared: the round is settled
        try:
            state = json.loads(payload)
            decision, round_id = state.get("decision"), state.get("round_id")
            if state.get("stale") or state.get("decided") or not isinstance(decision, dict) \
                    or not isinstance(round_id, str):
                return
            window = (round_id, decision.get("closes_at"))
        except (ValueError, TypeError, AttributeError):
            return
        if window not in self._answered_windows:
            self._answered_windows.add(window)
            asyncio.get_running_loop().create_task(self._decide(round_id))

    def _on_public(self, topic: str, payload: bytes) -> None:
        super()._on_public(topic, payload)
        if b'"decisions_open"' not in payload:
            return
        ev = json.loads(payload)
        if ev.get("event") == "decisions_open" and self.player_id in (ev.get("data") or {}).get("players", []):
            asyncio.get_running_loop().create_task(self._decide(str(ev["round_id"])))


def matgo_windows(games: dict[str, str], action_seconds: float) -> dict[str, float]:
    """A Matgo table's turn window: at least MATGO_ACTION_SECONDS. The house AI thinks in a worker
    process below the backend's priority (nice 10): on a loaded host a worker started again after a
    kill may wait seconds for the CPU, and the soak must not mistake that for an outage."""
    return {t: max(action_seconds, MATGO_ACTION_SECONDS) for t, g in games.items() if g == "matgo"}


def peer_plans(specs: dict[str, TableSpec]) -> dict[str, BetPlan]:
    """The bets of the turn games' tables (their players' chips, Matgo's cover), by table."""
    return {t: peer_plan(spec) for t, spec in specs.items() if spec.game in TURN_GAMES}


def make_players_of(url: str, specs: dict[str, TableSpec], seed: int,
                    silent_rate: float) -> tuple[list[MqttBus], list[Any]]:
    """The players of every table that has some (Sevenluck's deciders, the turn games' steady
    players), each table's on a persistent session of its own (a decision or a turn asked while
    they reconnect is not missed; a crashed broker may still lose it: they also read the public
    events and their retained state). Returns (their buses, the players)."""
    buses: list[MqttBus] = []
    players: list[Any] = []
    prng = random.Random(seed + 2)
    for i, (tid, spec) in enumerate(specs.items()):
        if spec.game == "sevenluck":
            pbus = MqttBus(url, client_id=f"soak-players-{tid}", persistent_session=True)
            buses.append(pbus)
            for n in range(1, SEVENLUCK_SEATS + 1):
                players.append(SoakPlayer(tid, f"player{n}", pbus, prng.choice(["q64", "random"]),
                                           rng=random.Random(prng.random()),
                                           think=round(prng.uniform(0.02, 0.3), 3), retries=20))
        elif spec.game in TURN_GAMES:
            pbus = MqttBus(url, client_id=f"soak-players-{tid}", persistent_session=True, accept_retained=True)
            buses.append(pbus)
            players += make_soak_players(spec.game, tid, pbus, spec.players, rng=random.Random(prng.random()),
                                         table_index=i, silent_rate=silent_rate)
    return buses, players


def make_soak_dealer(game: str, table_id: str, shoe: VirtualShoe, link: Any, bus: MqttBus, **kw: Any) -> VirtualDealer:
    """The table's virtual dealer (:func:`simulators.rig.make_dealer`), confirming its steps (stud's
    wash and shuffle and exposure window, Seotda's and Matgo's reshuffles) on the station topic
    through ``bus``, and dealing some rounds from a stacked deck (:mod:`tools.soak_games`)."""
    stack = SHUFFLERS.get(game)
    dealer = make_dealer(game, table_id, shoe, link, shuffler=stack() if stack else None, **kw)
    topic = topics.station(table_id)

    async def confirm(payload: bytes) -> None:
        # a station whose send hangs in a connection that is dying (no PUBACK until the client
        # notices, up to its publish timeout) sends again: the dealer presses confirm again on its
        # patience, with the same command id, instead of staring at a frozen screen
        try:
            async with asyncio.timeout(CONFIRM_SEND_SECONDS):
                await bus.publish(topic, payload, qos=1)
        except TimeoutError:
            pass

    dealer.actions = confirm
    return dealer


async def reload_process(proc: "BackendProcess", problems: list[str], tries: int = 20) -> bool:
    """SIGHUP ``proc`` (its table settings apply without a restart: the drain's ``auto_rounds =
    false``) until its log says it did not ignore it (a backend still starting ignores it);
    False when it could not (a refused reload is also a discrepancy)."""
    def lines() -> list[str]:
        try:
            return proc.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []

    for _ in range(tries):
        before = len(lines())
        proc.reload()
        await asyncio.sleep(1.0)
        new = lines()[before:]
        if any("reload refused" in line for line in new):
            problems.append(f"the backend refused the drain's reload (auto_rounds = false): see {proc.log_path}")
            return False
        if not any("reload ignored" in line for line in new):
            return proc.alive
    return False


class BackendProcess:
    """``python -m dealer run --config FILE`` as a child process (stderr appended to a log)."""

    def __init__(self, config: Path, log_path: Path, python: str = sys.executable,
                 env: dict[str, str] | None = None) -> None:
        self.config, self.log_path, self.python = config, log_path, python
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None
        with self.log_path.open("ab") as err:
            self.proc = subprocess.Popen([self.python, "-m", "dealer", "run", "--config", str(self.config)],
                                         stdout=subprocess.DEVNULL, stderr=err, preexec_fn=die_with_parent,
                                         env=None if self.env is None else os.environ | self.env)
        self.starts += 1

    def reload(self) -> None:
        """SIGHUP: the backend applies its config's table settings (auto_rounds) without a restart."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGHUP)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def terminate(self, timeout: float = 15.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
