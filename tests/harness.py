"""Test harness: a backend service, a recording MQTT client, a hand-driven PTY shoe, and a
reader link that records what a virtual dealer passes over it."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dealer.edge import topics
from dealer.edge.config import Settings, load_settings
from dealer.edge.journal import Journal
from dealer.edge.roles import SENDER, Role, command_topic
from dealer.edge.service import Service
from drivers.frames import Frame, FrameDecoder, Status
from drivers.bus import BusError
from drivers.mqtt import MqttBus
from simulators.pty_port import PtyPort
from simulators.shoe import VirtualShoe
from simulators.station import ShoeLink

TABLE = "T1"
READER = "SC1"
DEAL = ["AS", "KS", "AD", "KH", "AC", "KC"]  # A: three aces, B: three kings


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
    receives is acknowledged on ``results/ack`` (a result otherwise stays in the outbox and
    is re-sent)."""

    def __init__(self, url: str, *, settles: bool = True) -> None:
        self.bus = MqttBus(url, client_id=f"recorder-{uuid.uuid4().hex[:8]}", persistent_session=True,
                           accept_retained=True)
        self.messages: list[tuple[str, dict[str, Any]]] = []
        self.settles = settles
        self.bus.subscribe("studio/v1/#", self._on)
        self._task: asyncio.Task[None] | None = None
        self._acks: set[asyncio.Task[None]] = set()

    def _on(self, topic: str, payload: bytes) -> None:
        msg = json.loads(payload) if payload else {}  # empty: a retained catch-up message cleared
        self.messages.append((topic, msg))
        tid = topics.table_of(topic)
        if self.settles and tid is not None and topic == topics.results(tid) and "idempotency_key" in msg:
            ack = json.dumps({"idempotency_key": msg["idempotency_key"]}).encode()
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
        """The table's running turn, as a client watching its public ``turn`` events knows it
        (1 before the first)."""
        return next((m["data"]["turn"] for t, m in reversed(self.messages)
                     if t == topics.events(table_id) and m.get("event") == "turn"), 1)

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
    """A shoe on a real PTY, driven card by card by the test (the test is the dealer)."""

    def __init__(self, directory: Path, reader: str = READER, heartbeat: float = 0.2) -> None:
        self.port = PtyPort(directory, "shoe")
        self.shoe = VirtualShoe(reader)
        self.port.write(self.shoe.boot())
        self._hb = asyncio.get_running_loop().create_task(self._heartbeats(heartbeat))

    async def _heartbeats(self, every: float) -> None:
        while True:  # a live reader says so periodically, which also reveals lost frames
            await asyncio.sleep(every)
            self.port.write(self.shoe.heartbeat())

    @property
    def path(self) -> str:
        return self.port.path

    def write(self, data: bytes) -> None:
        self.port.write(data)

    def scan(self, code: str) -> None:
        self.write(self.shoe.scan(code))

    def close(self) -> None:
        self._hb.cancel()
        self.port.close()


async def start_service(settings: Settings, **kw: Any) -> tuple[Service, asyncio.Task[None]]:
    service = Service(settings, bus=MqttBus(settings.mqtt.url, client_id=settings.mqtt.client_id) if settings.mqtt.url else kw.pop("bus"), **kw)
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
