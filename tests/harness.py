"""Test harness: a backend service, a recording MQTT client, a hand-driven PTY shoe, and a
reader link that records what a virtual dealer passes over it; the real ``dealer run`` process
(its config and its start, kill and restart); the backend on the deployed broker (TLS,
credentials, a supervisor's key); and a peer game's table (stud, Seotda, Matgo) played
through the real service. Each helper is here once; test modules add only what is theirs and
import shared helpers only from the harness (never from another test module).

The rest of the harness, by what it holds: ``harness_cli`` (``dealer`` as a process),
``harness_mqtt`` (a table on an MQTT scanner gateway), ``harness_signed`` (a signed reader),
``harness_acl`` and ``harness_roles`` (the deployed broker and its roles' clients),
``harness_docs`` (what the docs and deploy files say), ``harness_journal`` (a core-fed journal),
``harness_moves``, ``harness_leases`` and ``harness_failover`` (tables that move between
owners and nodes), ``harness_visibility`` (who may see what, every game), ``harness_cards``,
``harness_sevenluck``, ``harness_stud`` and ``harness_matgo`` (one game's shared parts)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from dealer.core.round import Phase, Round
from dealer.edge import topics
from dealer.edge.config import Settings, load_settings
from dealer.edge.journal import Journal
from dealer.edge.roles import SENDER, Role, command_topic
from dealer.edge.service import Service
from drivers.frames import Frame, FrameDecoder, Status
from drivers.bus import BusError
from drivers.mqtt import MqttBus
from simulators.feed import Feed
from simulators.pty_port import PtyPort
from simulators.secure_broker import SecureMosquitto
from simulators.shoe import VirtualShoe
from simulators.station import ShoeLink
from tests.conftest import wait_until

TABLE = "T1"
READER = "SC1"
DEAL = ["AS", "KS", "AD", "KH", "AC", "KC"]  # A: three aces, B: three kings
POSITIONS = ["A1", "B1", "A2", "B2", "A3", "B3"]  # a teen-patti deal's order
K1 = bytes(range(32))  # two keys of the minimum length (a reader's, a supervisor's), for tests only
K2 = bytes(range(32, 64))


def journal_id(source: Service | Journal | Settings | Path | str) -> str:
    """The journal id of a service, a journal, or the journal file of settings or a path
    (opening a file that does not exist yet creates the journal the service will open)."""
    if isinstance(source, Service):
        return source.journal.journal_id
    if isinstance(source, Journal):
        return source.journal_id
    journal = Journal(source.service.journal_path if isinstance(source, Settings) else source)
    try:
        return journal.journal_id
    finally:
        journal.close()


def round_id(source: Service | Journal | Settings | Path | str, seq: int, table: str = TABLE) -> str:
    """The id of round ``seq`` of ``table`` as the service opens it on this journal: the
    journal id is part of every round id, so tests read it instead of spelling it."""
    return f"{table}-{journal_id(source)}-{seq:06d}"


def key(source: Service | Journal | Settings | Path | str, seq: int, table: str = TABLE) -> str:
    """The idempotency key of round ``seq`` of ``table`` on this journal."""
    return f"{table}:{round_id(source, seq, table)}"


def settings_for(tmp: Path, broker_url: str | None, port_path: str, **table: Any) -> Settings:
    cfg: dict[str, Any] = {
        "id": TABLE, "game": "teen-patti", "betting_seconds": 0.3, "pause_seconds": 0.1,
        "scanner": {"kind": "serial", "port": port_path, "reader_id": READER, "heartbeat_timeout": 30},
    }
    cfg.update(table)
    return load_settings(
        service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False},
        mqtt={"url": broker_url, "client_id": f"backend-{uuid.uuid4().hex[:6]}"},
        tables=[cfg],
    )


class Recorder:
    """A subscriber with a persistent session that records everything under studio/v1/#.

    It also plays settlement's part in the protocol unless ``settles=False``: every result it
    receives (the manifest of one in parts) is acknowledged on ``results/ack`` with the SHA-256
    of its bytes (a result otherwise stays in the outbox and is re-sent)."""

    def __init__(self, url: str, *, settles: bool = True) -> None:
        self.bus = MqttBus(url, client_id=f"recorder-{uuid.uuid4().hex[:8]}", persistent_session=True,
                           accept_retained=True)
        self.messages: list[tuple[str, dict[str, Any]]] = []
        self._feed = Feed()
        self.result_bytes: dict[str, bytes] = {}  # idempotency key -> the bytes of its result (manifest) as received
        self.settles = settles
        self.bus.subscribe("studio/v1/#", self._on)
        self._task: asyncio.Task[None] | None = None
        self._acks: set[asyncio.Task[None]] = set()

    def _on(self, topic: str, payload: bytes) -> None:
        msg = json.loads(payload) if payload else {}  # empty: a retained catch-up message cleared
        self.messages.append((topic, msg))
        tid = topics.table_of(topic)
        if tid is not None and topic == topics.state(tid):
            # the round events and prompts a state carries, once each, as one stream per table:
            # listed as on ``events`` and ``prompts`` (what ``events()`` and ``prompts()`` read)
            news = self._feed.read(payload)
            self.messages += [(topics.events(tid), ev) for ev in news.events]
            self.messages += [(topics.table_topic(tid, "prompts"), p) for p in news.prompts]
            return
        if (tid is None or topic != topics.results(tid) or "idempotency_key" not in msg
                or msg.get("schema_id") == "studio.v1.round_result_part"):
            return  # not a whole result nor the manifest of one in parts
        self.result_bytes[str(msg["idempotency_key"])] = payload
        if self.settles:
            ack = json.dumps({"idempotency_key": msg["idempotency_key"],
                              "result_sha256": hashlib.sha256(payload).hexdigest()}).encode()
            task = asyncio.get_running_loop().create_task(self._ack(topics.results_ack(tid), ack))
            self._acks.add(task)
            task.add_done_callback(self._acks.discard)

    async def _ack(self, topic: str, payload: bytes) -> None:
        try:
            await self.bus.publish(topic, payload)
        except BusError:
            pass  # not connected: the backend sends the result again, and it is acknowledged then

    async def start(self) -> "Recorder":
        self._task = asyncio.create_task(self.bus.run())
        await asyncio.wait_for(self.bus.wait_connected(), 10)
        return self

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def on(self, leaf: str) -> list[dict[str, Any]]:
        return [m for t, m in self.messages if t.endswith("/" + leaf)]

    def results(self, key: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.on("results") if key is None or m["idempotency_key"] == key]

    def prompts(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.on("prompts") if kind is None or m["kind"] == kind]

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.on("events") if name is None or m["event"] == name]

    def last_prompt(self) -> dict[str, Any] | None:
        p = self.prompts()
        return p[-1] if p else None

    def expects(self, position: str, round_id: str | None = None) -> bool:
        p = self.last_prompt()
        return bool(p and p["kind"] in ("NEXT", "RESCAN", "ALERT") and p["position"] == position
                    and (round_id is None or p["round_id"] == round_id))

    async def publish(self, topic: str, payload: dict[str, Any]) -> None:
        await self.bus.publish(topic, json.dumps(payload).encode())

    def current_round(self, table_id: str) -> str | None:
        """The round the table opened last, as a client learns it from ``round_opened``."""
        return next((m["round_id"] for t, m in reversed(self.messages)
                     if t == topics.events(table_id) and m.get("event") == "round_opened"), None)

    def current_turn(self, table_id: str) -> int:
        """The table's running turn, as a client watching its public ``turn`` events and the
        player's own ``your_turn`` knows it (1 before the first). Protocol 2: a batch's private
        ``your_turn`` goes out before the state carrying its public ``turn`` event, so the player
        to act may know the turn first."""
        private = topics.player(table_id, "")
        return next((m["data"]["turn"] for t, m in reversed(self.messages)
                     if (t == topics.events(table_id) and m.get("event") == "turn")
                     or (t.startswith(private) and t.count("/") == private.count("/") and m.get("kind") == "your_turn")),
                    1)

    async def command(self, topic: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Send a command as a well-behaved client does: on its role's topic of the table of
        ``topic``, with a fresh ``command_id`` and the current ``round_id`` (and ``turn``) unless
        the payload names them. Returns what was sent."""
        tid = topics.table_of(topic)
        assert tid is not None, topic
        msg = {"command_id": f"c-{uuid.uuid4().hex[:12]}", **payload}
        if "round_id" not in msg:
            msg["round_id"] = self.current_round(tid)
        if msg.get("type") == "player_action" and "turn" not in msg and not msg.get("reserve"):
            msg["turn"] = self.current_turn(tid)
        role = SENDER.get(str(msg.get("type")), Role.PLAYER_PLATFORM)
        await self.bus.publish(command_topic(role, tid), json.dumps(msg).encode())
        return msg


class HandShoe:
    """A shoe on a real PTY, driven card by card by the test (the test is the dealer), with a
    heartbeat every ``heartbeat`` seconds that a test may pause (``beating``). With a ``key``
    it signs its frames; ``inject`` writes what an attacker on the line would."""

    def __init__(self, directory: Path, reader: str = READER, heartbeat: float = 0.2, *,
                 key: bytes | None = None, boot_count: int = 0) -> None:
        self.port = PtyPort(directory, "shoe")
        self.shoe = VirtualShoe(reader, key=key, boot_count=boot_count)
        self.beating = True
        self.port.write(self.shoe.boot())
        self._hb = asyncio.get_running_loop().create_task(self._heartbeats(heartbeat))

    async def _heartbeats(self, every: float) -> None:
        while True:  # a live reader says so periodically, which also reveals lost frames
            await asyncio.sleep(every)
            if self.beating:
                self.port.write(self.shoe.heartbeat())

    @property
    def path(self) -> str:
        return self.port.path

    def write(self, data: bytes) -> None:
        self.port.write(data)

    def send(self, wire: bytes) -> bytes:
        """What the reader itself sends."""
        self.port.write(wire)
        return wire

    def inject(self, wire: bytes) -> None:
        """What an attacker on the line sends."""
        self.port.write(wire)

    def scan(self, code: str) -> None:
        self.write(self.shoe.scan(code))

    def close(self) -> None:
        self._hb.cancel()
        self.port.close()


async def deal(rec: Recorder, shoe: HandShoe, cards: list[str], positions: list[str]) -> None:
    """Scan each card once the station prompts for its position."""
    for code, pos in zip(cards, positions):
        await wait_until(lambda: rec.expects(pos), what=f"prompt NEXT {pos}")
        shoe.scan(code)


async def start_service(settings: Settings, **kw: Any) -> tuple[Service, asyncio.Task[None]]:
    service = Service(settings, bus=MqttBus(settings.mqtt.urls, client_id=settings.mqtt.client_id) if settings.mqtt.url else kw.pop("bus"), **kw)
    task = asyncio.create_task(service.run())
    await asyncio.wait_for(service.ready.wait(), 10)
    return service, task


async def stop_service(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def strings(value: Any) -> Iterator[str]:
    """Every string anywhere in a decoded JSON message."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


class RecordingReader(ShoeLink):
    """Decodes what the dealer passes over the reader."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder()
        self.cards: list[str] = []

    async def send(self, chunks: Any) -> None:
        for chunk in chunks:
            for item in self.decoder.feed(chunk):
                if isinstance(item, Frame) and item.status == Status.OK:
                    self.cards.append(item.payload)


# --- the real `dealer run` process ------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def _toml_table(header: str, body: dict[str, Any], out: list[str]) -> None:
    out.append(header)
    out.extend(f"{k} = {_toml(v)}" for k, v in body.items() if not isinstance(v, dict))
    for k, v in body.items():
        if isinstance(v, dict):
            _toml_table(f"[{header.strip('[]')}.{k}]", v, out)


def dealer_config(tmp: Path, *, tables: list[dict[str, Any]] = (), journal: Path | None = None,  # type: ignore[assignment]
                  broker_url: str = "mqtt://127.0.0.1:1", node_id: str | None = None, client_id: str | None = None,
                  metrics_port: int | None = None, log_level: str = "info") -> Path:
    """Write ``tmp/dealer.toml`` for a real ``dealer run`` and return its path: the journal in
    ``tmp`` unless given, metrics off unless a port is given (0: any free port), the default
    client id (``dealer-{node_id}``) unless one is given."""
    service: dict[str, Any] = {"node_id": node_id, "journal_path": str(journal or tmp / "journal.sqlite")}
    service |= {"metrics_enabled": False} if metrics_port is None else {"metrics_port": metrics_port}
    service["log_level"] = log_level
    out: list[str] = []
    _toml_table("[service]", {k: v for k, v in service.items() if v is not None}, out)
    _toml_table("[mqtt]", {"url": broker_url} | ({"client_id": client_id} if client_id else {}), out)
    for t in tables:
        _toml_table("[[tables]]", t, out)
    cfg = tmp / "dealer.toml"
    cfg.write_text("\n".join(out) + "\n")
    return cfg


def serial_table(port: str, *, reader: str = READER, scanner: dict[str, Any] | None = None,
                 **table: Any) -> dict[str, Any]:
    """A teen-patti table (``TABLE``) on a serial shoe at ``port``, quick rounds: the table of
    the process tests; ``table`` and ``scanner`` add or replace keys."""
    return {"id": TABLE, "game": "teen-patti", "betting_seconds": 0.3, "pause_seconds": 0.1} | table | {
        "scanner": {"kind": "serial", "port": port, "reader_id": reader, "heartbeat_timeout": 30} | (scanner or {})}


NODE = "test-host"  # the node of write_config's configs


def write_config(tmp: Path, journal: Path, *, broker_url: str = "mqtt://127.0.0.1:1", metrics_port: int = 0,
                 shoe: str | None = None, log_level: str = "info", tables: list[dict[str, Any]] = ()) -> Path:  # type: ignore[assignment]
    """A config without ``[mqtt].client_id`` (the default one, dealer-{node_id}, is used), with
    the serial table on ``shoe`` when one is given."""
    return dealer_config(tmp, journal=journal, broker_url=broker_url, node_id=NODE, metrics_port=metrics_port,
                         log_level=log_level, tables=[serial_table(shoe)] if shoe is not None else list(tables))


def mqtt_table(reader: str = READER) -> dict[str, Any]:
    """A teen-patti table (``TABLE``) with an MQTT scanner gateway, every timer at its default."""
    return {"id": TABLE, "game": "teen-patti", "scanner": {"kind": "mqtt", "reader_id": reader}}


def dealer_env(**extra: str) -> dict[str, str]:
    """The environment of a ``dealer`` process: this checkout first, no ``DEALER_*`` setting
    from the test runner's environment (only what the test gives in ``extra``)."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DEALER_")}
    env["PYTHONPATH"] = str(ROOT)
    return env | extra


def dealer_run(config: Path, timeout: float = 30, **env: str) -> subprocess.CompletedProcess[str]:
    """``dealer run`` to its end (a refused start), its output captured."""
    return subprocess.run([sys.executable, "-m", "dealer", "run", "--config", str(config)], cwd=ROOT,
                          env=dealer_env(**env), capture_output=True, text=True, timeout=timeout)


def refused_start(proc: subprocess.CompletedProcess[str]) -> str:
    """A start refused with exit 2 and no traceback: its last line on stderr."""
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr.strip().splitlines()[-1]


class DealerProcess:
    """A running ``dealer run``: stderr appended to ``log``, stdout to ``stdout`` (or nowhere);
    started again on the same config as a restart."""

    def __init__(self, config: Path, log: Path, stdout: Path | None = None) -> None:
        self.config, self.log, self.stdout = config, log, stdout
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> "DealerProcess":
        out = self.stdout.open("ab") if self.stdout is not None else subprocess.DEVNULL
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "dealer", "run", "--config", str(self.config)],
                                         cwd=ROOT, env=dealer_env(), stdout=out, stderr=err)
        if not isinstance(out, int):
            out.close()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: nothing gets to run on the way out."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def terminate(self, timeout: float = 20) -> int:
        """SIGTERM, and the exit status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        """At a test's end, whatever state it is in."""
        if self.running():
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


# --- the backend on the deployed broker (TLS, credentials, the rendered ACL) ---------------------


def secret_file(path: Path, text: str) -> Path:
    """A file only its owner may read, as the backend wants its keys and passwords."""
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def secure_settings(tmp: Path, broker: SecureMosquitto, *, password: str, supervisor_key: bytes,
                    tables: list[dict[str, Any]]) -> Settings:
    """``tables`` served over TLS as ``dealer-backend`` (its ``password`` in a file), node ``n1``;
    supervisor ``sup-ana`` (its key in ``tmp/sup-ana.key``) may command T1."""
    key = secret_file(tmp / "sup-ana.key", supervisor_key.hex())
    pw = secret_file(tmp / "backend-password", password)
    return load_settings(
        service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False, "node_id": "n1"},
        mqtt={"url": broker.tls_url, "client_id": f"backend-{uuid.uuid4().hex[:6]}", "username": "dealer-backend",
              "password_file": str(pw), "ca_file": str(broker.ca_file)},
        tables=tables,
        security={"supervisors": [{"id": "sup-ana", "key_files": [str(key)], "tables": ["T1"]}]})


# --- a peer game's table (stud, Seotda, Matgo) through the real service ---------------------------


class PeerTable:
    """The test is the dealer (a PTY shoe it scans card by card, confirmations on the actions
    topic) and the players (actions on the actions topic, replies on their own topics) of the
    service's one table. A game's test adds its own moves (stud's amounts, Seotda's buttons,
    Matgo's cards)."""

    def __init__(self, service: Service, rec: Recorder, shoe: HandShoe, table_id: str | None = None) -> None:
        self.service, self.rec, self.shoe = service, rec, shoe
        self.table_id = table_id if table_id is not None else next(iter(service.tables))
        self.act_topic = topics.actions(self.table_id)
        self.answered: set[tuple[str, int]] = set()
        self.rnd: Round | None = None
        self.stakes: dict[str, Decimal] = {}  # the chips each player brought to the hand
        self.task: asyncio.Task[None] | None = None  # the service's run, when served_table started it

    @property
    def r1(self) -> str:
        """The id of this journal's first round (the journal id is part of it)."""
        return round_id(self.service, 1, self.table_id)

    @property
    def r2(self) -> str:
        return round_id(self.service, 2, self.table_id)

    @property
    def key1(self) -> str:
        return key(self.service, 1, self.table_id)

    def mine(self, player: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [m for t, m in self.rec.messages
                if t == topics.player(self.table_id, player) and (kind is None or m["kind"] == kind)]

    async def sit(self, chips: dict[str, tuple[int, str]], round_id: str | None = None) -> None:
        """Seat each player (seat, chips) in the round (default: the first), then close betting."""
        round_id = round_id or self.r1
        await wait_until(lambda: any(e["round_id"] == round_id for e in self.rec.events("round_opened")),
                         what=f"round {round_id} opened")
        self.stakes = {p: Decimal(c) for p, (_, c) in chips.items()}
        for p, (seat, c) in chips.items():
            await self.rec.command(self.act_topic, {"type": "place_bet", "bet_id": f"{round_id}-{p}", "player_id": p,
                                                    "bet_type": "chips", "stake": c, "seat": seat, "round_id": round_id})
        await wait_until(lambda: all(any(m["round_id"] == round_id for m in self.mine(p, "bet_accepted"))
                                     for p in chips), what="every player seated")
        self.rnd = self.service.tables[self.table_id].current
        assert self.rnd is not None and self.rnd.round_id == round_id
        await self.rec.command(self.act_topic, {"type": "close_betting", "by": "dealer"})

    async def confirm(self, step: str = "SHUFFLE", at: int | None = None) -> None:
        """Confirm ``step`` once the station asks for it (at step ``at``, when given)."""
        await wait_until(lambda: (p := self.rec.last_prompt()) is not None and p["kind"] == "CONFIRM"
                         and p["position"] == step and (at is None or p["step"] == at), what=f"CONFIRM {step}")
        await self.rec.command(self.act_topic, {"type": "dealer_confirm", "step": step})

    async def deal(self, *cards: tuple[str, str]) -> None:
        """Scan each (position, code) once the station asks for that position."""
        assert self.rnd is not None
        for pos, code in cards:
            await wait_until(lambda: self.rec.expects(pos, self.rnd.round_id), what=f"NEXT {pos}")
            n = len(self.rnd.cards)
            self.shoe.scan(code)
            await wait_until(lambda: len(self.rnd.cards) == n + 1, what=f"{pos} registered")
            assert self.rnd.cards[pos] == code

    async def deal_blind(self, *cards: tuple[str, str]) -> None:
        """Scan while the broker is down: follow the service's own state, not the prompts."""
        assert self.rnd is not None
        for pos, code in cards:
            await wait_until(lambda: self.rnd.expected_position == pos and self.rnd.phase in
                             (Phase.BETTING_CLOSED, Phase.DEALING), what=f"the deal at {pos}")
            n = len(self.rnd.cards)
            self.shoe.scan(code)
            await wait_until(lambda: len(self.rnd.cards) == n + 1, what=f"{pos} registered")

    def _open_turn(self, player: str) -> dict[str, Any] | None:
        return next((m for m in self.mine(player, "your_turn") if (player, m["data"]["turn"]) not in self.answered),
                    None)

    async def turn(self, player: str) -> dict[str, Any]:
        """Wait for the player's next ``your_turn``; returns its data (the options)."""
        msg = await wait_until(lambda: self._open_turn(player), what=f"{player}'s turn")
        self.answered.add((player, msg["data"]["turn"]))
        return msg["data"]

    async def refused(self, player: str, payload: dict[str, Any], contains: str) -> str:
        """Send an action that must be refused; return the reason the player was given."""
        n = len(self.mine(player, "rejected"))
        await self.rec.command(self.act_topic, payload)
        await wait_until(lambda: len(self.mine(player, "rejected")) > n, what=f"{player} told why")
        reason = self.mine(player, "rejected")[n]["data"]["reason"]
        assert contains in reason, reason
        return reason


P = TypeVar("P", bound=PeerTable)


@contextlib.asynccontextmanager
async def served_table(make: Callable[[Service, Recorder, HandShoe, Settings], P], broker_url: str, pty_dir: Path,
                       reader: str, settings: Callable[[str], Settings]) -> AsyncIterator[P]:
    """A shoe on a PTY, a recorder, and the service on ``settings(shoe path)``; the table the
    test plays (``make``). The service stopped at the end is ``table.task``: a test may stop it
    and start another on the same journal."""
    shoe = HandShoe(pty_dir, reader=reader)
    rec = await Recorder(broker_url).start()
    s = settings(shoe.path)
    service, task = await start_service(s)
    t = make(service, rec, shoe, s)
    t.task = task
    try:
        yield t
    finally:
        await stop_service(t.task)
        await rec.stop()
        shoe.close()


async def play_unattended(service: Service, sim: MqttBus, dealer: Any, rec: Recorder, port: PtyPort,
                          enough: Callable[[], Any], *, timeout: float, what: str) -> None:
    """Run the service, the simulated players' bus and then the virtual dealer until
    ``enough()``; stop them all, the recorder and the PTY whatever happens."""
    tasks = [asyncio.create_task(service.run()), asyncio.create_task(sim.run())]
    try:
        await sim.wait_connected()
        await wait_until(lambda: service.bus.connected, what="backend connected")
        tasks.append(asyncio.create_task(dealer.run()))
        await wait_until(enough, timeout=timeout, what=what)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await rec.stop()
        port.close()
