"""Black-box: who may publish and who may read every topic, on a real Mosquitto running the
deployed configuration (``deploy/mosquitto/mosquitto.conf``, ports and paths substituted)
with the ACL rendered by ``dealer deploy acl`` for two tables and one supervisor.

Each user publishes a probe to every topic of the protocol, and a test-only ``auditor`` (read
and write everything, appended to the rendered ACL) records what the broker let through;
then the auditor publishes a probe on every topic and each user records what it received.
Both are compared with the role table of ``docs/mqtt-topics.md`` written out by hand (tests/harness_acl.py),
so a change to the renderer that widens anyone's rights fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiomqtt

from tools.deploy import render_acl
from drivers.mqtt import make_tls_context
from simulators.secure_broker import SecureMosquitto
from tests.conftest import wait_until
from tests.harness_acl import MAY_READ, MAY_WRITE, PROBED, USERS, broker, studio  # noqa: F401  (broker: the module-scoped secure broker fixture)

@contextlib.asynccontextmanager
async def client(broker: SecureMosquitto, user: str) -> AsyncIterator[aiomqtt.Client]:
    async with aiomqtt.Client("127.0.0.1", broker.tls_port, username=user, password=USERS[user],
                              identifier=f"{user}-{uuid.uuid4().hex[:8]}", tls_context=make_tls_context(broker.ca_file),
                              timeout=5, keepalive=10) as c:
        yield c


async def _collect(c: aiomqtt.Client, into: list[tuple[str, bytes]]) -> None:
    async for msg in c.messages:
        into.append((str(msg.topic), bytes(msg.payload)))  # type: ignore[arg-type]


def test_the_rendered_acl_is_the_role_table(tmp_path: Path) -> None:
    """The renderer's grants, user by user (a readable diff when the role table changes)."""
    blocks: dict[str, list[str]] = {}
    user = None
    for line in render_acl(studio(tmp_path)).splitlines():
        if line.startswith("user "):
            user = line.split()[1]
            blocks[user] = []
        elif line.startswith("topic ") and user:
            blocks[user].append(line)
    assert blocks["ops"] == ["topic read studio/v1/tables/+/events",
                             "topic read studio/v1/tables/+/results",
                             "topic read studio/v1/tables/+/state", "topic read studio/v1/tables/+/history",
                             "topic read studio/v1/backends/+/status",
                             "topic read studio/v1/backends/+/journal", "topic read $SYS/#"]
    assert blocks["station-T1"] == ["topic read studio/v1/tables/T1/events",
                                    "topic write studio/v1/tables/T1/station",
                                    "topic read studio/v1/tables/T1/state", "topic read studio/v1/tables/T1/history",
                                    "topic read studio/v1/backends/+/status"]
    assert blocks["supervisor-sup-ana"] == [
        "topic write studio/v1/tables/T1/supervisor",
        "topic read studio/v1/tables/T1/events",
        "topic read studio/v1/tables/T1/state", "topic read studio/v1/tables/T1/history",
        "topic read studio/v1/backends/+/status"]
    assert blocks["player-platform"] == ["topic write studio/v1/tables/+/actions",
                                         "topic read studio/v1/tables/+/events", "topic read studio/v1/tables/+/state",
                                         "topic read studio/v1/backends/+/status"]
    assert not any("#" in ln for u, lines in blocks.items() if u != "ops" for ln in lines)


async def test_who_may_publish_where(broker: SecureMosquitto) -> None:
    seen: list[tuple[str, bytes]] = []
    async with client(broker, "auditor") as auditor:
        for topic in PROBED.values():
            await auditor.subscribe(topic, qos=1)
        collector = asyncio.create_task(_collect(auditor, seen))
        try:
            for user in MAY_WRITE:
                async with client(broker, user) as c:
                    for name, topic in PROBED.items():
                        # MQTT 3.1.1: a denied publish is still acknowledged, then dropped
                        await c.publish(topic, json.dumps({"probe": f"{user}|{name}"}).encode(), qos=1)
            # every probe was acknowledged, so the broker has routed (or dropped) it already: a
            # control published now is queued behind every probe it let through
            control = b'{"control": 1}'
            await auditor.publish(PROBED["T1/events"], control, qos=1)
            await wait_until(lambda: any(p == control for _, p in seen), what="the auditor's control")
        finally:
            collector.cancel()
            await asyncio.gather(collector, return_exceptions=True)
    got: dict[str, set[str]] = {u: set() for u in MAY_WRITE}
    for topic, payload in seen:
        probe = json.loads(payload).get("probe")
        if probe:
            user, name = probe.split("|")
            assert PROBED[name] == topic
            got[user].add(name)
    assert got == MAY_WRITE


async def test_who_may_read_what(broker: SecureMosquitto) -> None:
    boxes: dict[str, list[tuple[str, bytes]]] = {u: [] for u in MAY_READ}
    async with contextlib.AsyncExitStack() as stack:
        tasks = []
        for user in MAY_READ:
            c = await stack.enter_async_context(client(broker, user))
            for topic in PROBED.values():
                await c.subscribe(topic, qos=1)
            tasks.append(asyncio.create_task(_collect(c, boxes[user])))
        auditor = await stack.enter_async_context(client(broker, "auditor"))
        for name, topic in PROBED.items():
            await auditor.publish(topic, json.dumps({"probe": name}).encode(), qos=1)
        # a control after the probes, from the same publisher, arrives behind them (MQTT keeps
        # one publisher's order): once a user has it, it has every probe it may read
        # (users with no read right get none)
        for user, readable in MAY_READ.items():
            if readable:
                name = sorted(readable)[0]
                await auditor.publish(PROBED[name], json.dumps({"control": user}).encode(), qos=1)
                await wait_until(lambda: any(json.loads(p).get("control") == user for _, p in boxes[user]),
                                 what=f"{user}'s control")
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    got = {u: {json.loads(p)["probe"] for _, p in box if "probe" in json.loads(p)} for u, box in boxes.items()}
    assert got == MAY_READ
    assert not any(n.startswith("T1/players/") for n in got["ops"])  # ops never sees a hole card
