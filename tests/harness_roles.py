"""Test harness: the backend on the deployed broker, each role with its own credentials. A
role's client (what it may read, recorded), the supervisor's keys and signed commands, one
valid payload of each command type, the barrier that waits until everything sent has been
answered, and the two-table studio whose T1 a supervisor may operate."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt

from dealer.edge import topics
from dealer.edge.config import Settings
from dealer.edge.service import Service
from dealer.edge.signing import sign_command
from drivers.mqtt import make_tls_context
from simulators.feed import Feed
from simulators.secure_broker import SecureMosquitto
from tests.conftest import cancel_and_wait, wait_until
from tests.harness import secure_settings
from tests.harness_acl import USERS
from tests.harness_mqtt import Gateway

SAMPLES: dict[str, dict[str, Any]] = {
    "place_bet": {"type": "place_bet", "bet_id": "b1", "player_id": "p1", "bet_type": "tie", "stake": "1"},
    "player_decision": {"type": "player_decision", "player_id": "p1", "action": "PLAY"},
    "player_action": {"type": "player_action", "player_id": "p1", "action": "CHECK", "turn": 1},
    "close_betting": {"type": "close_betting"},
    "dealer_confirm": {"type": "dealer_confirm", "step": "WASH"},
    "card_exposed": {"type": "card_exposed", "position": "P1.7"},
    "supervisor_void": {"type": "supervisor_void", "supervisor": "sup-ana", "reason": "misdeal"},
}

SUP_KEY = bytes.fromhex("11" * 32)  # the key tests/harness_acl.py writes for sup-ana
OTHER_KEY = bytes.fromhex("22" * 32)


class Client:
    """One role's MQTT client (its own credentials), recording what it may read."""

    def __init__(self, b: SecureMosquitto, user: str, *filters: str) -> None:
        self.b, self.user, self.filters = b, user, filters
        self.got: list[tuple[str, dict[str, Any]]] = []
        self._feed = Feed()
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> "Client":
        self.c = await self._stack.enter_async_context(aiomqtt.Client(
            "127.0.0.1", self.b.tls_port, username=self.user, password=USERS[self.user],
            identifier=f"{self.user}-{uuid.uuid4().hex[:8]}", tls_context=make_tls_context(self.b.ca_file),
            timeout=5, keepalive=10))
        for f in self.filters:
            await self.c.subscribe(f, qos=1)
        self._task = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        async for msg in self.c.messages:
            payload = bytes(msg.payload)  # type: ignore[arg-type]
            topic = str(msg.topic)
            self.got.append((topic, json.loads(payload) if payload else {}))  # empty: a retained state cleared
            tid = topics.table_of(topic)
            if tid is not None and topic == topics.state(tid):
                # protocol 2: the round events and prompts a state carries, once each (deduped by
                # version), listed as on ``events`` and ``prompts`` (what ``events()`` and ``prompts()`` read)
                news = self._feed.read(payload)
                self.got += [(topics.events(tid), ev) for ev in news.events]
                self.got += [(topics.table_topic(tid, "prompts"), p) for p in news.prompts]

    async def __aexit__(self, *exc: object) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self._stack.aclose()

    async def send(self, topic: str, payload: dict[str, Any]) -> None:
        await self.c.publish(topic, json.dumps(payload).encode(), qos=1)

    async def publish(self, topic: str, payload: bytes) -> None:
        """Bytes as they are (a scanner gateway's messages)."""
        await self.c.publish(topic, payload, qos=1)

    def events(self, name: str) -> list[dict[str, Any]]:
        return [m for t, m in self.got if t.endswith("/events") and m.get("event") == name]

    def prompts(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [m for t, m in self.got if t.endswith("/prompts") and (kind is None or m["kind"] == kind)]

    def mine(self, kind: str) -> list[dict[str, Any]]:
        return [m for t, m in self.got if "/players/" in t and m.get("kind") == kind]


def void(round_id: str, *, command_id: str | None = None, reason: str = "shoe dropped", key: bytes = SUP_KEY,
         issued_at: int | None = None, table: str = "T1", supervisor: str = "sup-ana") -> dict[str, Any]:
    body = {"type": "supervisor_void", "command_id": command_id or f"v-{uuid.uuid4().hex[:10]}",
            "supervisor": supervisor, "table_id": table, "round_id": round_id,
            "issued_at": issued_at if issued_at is not None else time.time_ns() // 1_000_000, "reason": reason}
    return sign_command(key, body)


def bet(round_id: str | None, bet_id: str = "b1", command_id: str | None = None, **kw: Any) -> dict[str, Any]:
    out = {"type": "place_bet", "bet_id": bet_id, "player_id": "player-7", "bet_type": "player_a", "stake": "10",
           "command_id": command_id or f"c-{uuid.uuid4().hex[:10]}", "round_id": round_id}
    return {k: v for k, v in (out | kw).items() if v is not None}


def refused(watch: Client, n: int) -> list[str]:
    return [e["data"]["reason"] for e in watch.events("rejected")[n:]
            if not str(e["data"].get("command_id") or "").startswith("flush-")]


async def flushed(sender: Client, watch: Client, topic: str) -> None:
    """Wait until everything sent before now has been answered, instead of sleeping: a control
    command for a round that does not exist goes through the input queue behind every earlier
    command (refusals at the edge are answered at once, before it), so once its refusal is
    seen, nothing sent earlier can still arrive. A message the broker dropped never will."""
    cid = f"flush-{uuid.uuid4().hex[:10]}"
    ghost = "T1-999998"
    msg = void(ghost, command_id=cid) if topic.endswith("/supervisor") else bet(ghost, "flush", cid)
    await sender.send(topic, msg)
    await wait_until(lambda: any(e["data"].get("command_id") == cid for e in watch.events("rejected")),
                     timeout=30, what="the control command's answer")


def studio(tmp: Path, b: SecureMosquitto, **t1: Any) -> Settings:
    """T1 (configurable; sup-ana may command it) and T2, the backend over TLS as dealer-backend."""
    tables = [{"id": "T1", "game": "teen-patti", "betting_seconds": 30.0, "pause_seconds": 0.1,
               "scanner": {"kind": "mqtt", "reader_id": "SC1", "heartbeat_timeout": 60}} | t1,
              {"id": "T2", "game": "teen-patti", "auto_rounds": False,
               "scanner": {"kind": "mqtt", "reader_id": "SC2", "heartbeat_timeout": 60}}]
    return secure_settings(tmp, b, password=USERS["dealer-backend"], supervisor_key=SUP_KEY, tables=tables)


@contextlib.asynccontextmanager
async def backend(s: Settings, b: SecureMosquitto) -> AsyncIterator[tuple[Service, Gateway]]:
    """The backend, and T1's scanner gateway beating (so the reader's link is up)."""
    from dealer.edge import runner

    service = Service(s, bus=runner.build_bus(s))
    task = asyncio.create_task(service.run())
    async with Client(b, "scanner-T1") as gw_client:
        gw = Gateway(gw_client.publish, reader="SC1")
        beat = asyncio.create_task(gw.beat())
        try:
            await wait_until(lambda: service.bus.connected and service.ready.is_set() and service.links["T1"].ready,
                             what="backend connected, T1's reader up")
            yield service, gw
        finally:
            await cancel_and_wait(beat, task)


def operation(kind: str, *, command_id: str | None = None, key: bytes = SUP_KEY, table: str = "T1",
              reason: str | None = None, issued_at: int | None = None, **extra: Any) -> dict[str, Any]:
    body = {"type": f"supervisor_{kind}", "command_id": command_id or f"{kind}-{uuid.uuid4().hex[:10]}",
            "supervisor": "sup-ana", "table_id": table,
            "issued_at": issued_at if issued_at is not None else time.time_ns() // 1_000_000, **extra}
    if reason is not None:
        body["reason"] = reason
    return sign_command(key, body)
