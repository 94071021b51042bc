"""What differs between the brokers the backend supports, found by running each (docs/brokers.md):
Mosquitto 2.0, RabbitMQ 3.10's MQTT plugin and NATS 2.9's MQTT gateway, each a private process
(``any_broker``). Every test states what each broker does, so a broker upgrade that changes a
behaviour the backend relies on (or copes with) fails here first. A bare MQTT client
(tests/raw_mqtt.py) shows what a library would hide: the DUP flag, the granted QoS, the broker
closing the connection.

Absence is never waited for: a subscriber that must not get a retained message is sent a live
marker after subscribing, and what arrives before the marker is what the broker replayed."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from drivers.bus import BusError
from drivers.mqtt import MqttBus, cancel_and_wait
from simulators.brokers import BrokerProcess, NatsProcess
from tests.conftest import wait_until
from tests.raw_mqtt import Publish, RawClient

pytestmark = pytest.mark.integration  # broker processes


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def acked(client: RawClient, topic: str, payload: bytes, *, retain: bool = False) -> None:
    """Publish at QoS 1 and wait for the PUBACK."""
    pid = client.publish(topic, payload, qos=1, retain=retain)
    while True:
        kind, body = client.read()
        if kind >> 4 == 4 and int.from_bytes(body[:2], "big") == pid:
            return


def before_marker(port: int, sub: RawClient, marker_topic: str) -> list[Publish]:
    """What ``sub`` receives before a live marker published on ``marker_topic`` (which its
    filter matches) after its subscription: the replayed retained messages, if any."""
    pub = RawClient(port, uid("marker"))
    acked(pub, marker_topic, b"marker")
    pub.disconnect()
    got: list[Publish] = []
    while True:
        batch = sub.publishes(1, timeout=10)
        assert batch, "the marker never came"
        if batch[0].payload == b"marker" and batch[0].topic == marker_topic:
            return got
        got.append(batch[0])


def test_retained_messages_reach_exact_filters_everywhere_and_wildcards_except_on_rabbitmq(
        any_broker: BrokerProcess) -> None:
    """RabbitMQ 3.10's retainer matches a subscription's filter literally: a filter with '+' or
    '#' gets no retained message. The backend's retained catch-up topics are read by exact
    filters (tests/test_catchup.py runs on all three)."""
    port, root = any_broker.port, f"k/{uid('t')}"
    pub = RawClient(port, uid("pub"))
    acked(pub, f"{root}/T1/state", b'{"v":1}', retain=True)
    pub.disconnect()

    exact = RawClient(port, uid("exact"))
    assert exact.subscribe(f"{root}/T1/state") == 1
    got = before_marker(port, exact, f"{root}/T1/state")
    assert [(p.payload, p.retain, p.qos) for p in got] == [(b'{"v":1}', True, 1)]  # QoS 1 on NATS 2.9 too

    wild = RawClient(port, uid("wild"))
    assert wild.subscribe(f"{root}/+/state") == 1
    replayed = before_marker(port, wild, f"{root}/T2/state")
    expected = {"mosquitto": [b'{"v":1}'], "nats": [b'{"v":1}'], "rabbitmq": []}[any_broker.kind]
    assert [p.payload for p in replayed] == expected
    for c in (exact, wild):
        c.disconnect()


async def test_a_dot_in_a_topic_differs_per_broker_and_the_bus_never_sends_one(any_broker: BrokerProcess) -> None:
    """Mosquitto keeps a '.' as it is; RabbitMQ delivers it as '/' (``players/ann.state`` reaches
    ``players/ann/state``); NATS 2.9 closes the connection that publishes it. So the bus refuses
    such a topic before sending, and stays connected."""
    port, root = any_broker.port, f"dots/{uid('t')}"
    sub = RawClient(port, uid("sub"))
    assert sub.subscribe(f"{root}/#") == 1
    pub = RawClient(port, uid("pub"))
    pid = pub.publish(f"{root}/ann.state", b"private", qos=1)
    if any_broker.kind == "nats":
        assert pub.closed_by_broker()
        assert before_marker(port, sub, f"{root}/marker") == []
    else:
        kind, body = pub.read()
        assert kind >> 4 == 4 and int.from_bytes(body[:2], "big") == pid  # PUBACK
        got = sub.publishes(1, timeout=10)
        delivered = {"mosquitto": f"{root}/ann.state", "rabbitmq": f"{root}/ann/state"}[any_broker.kind]
        assert [(p.topic, p.payload) for p in got] == [(delivered, b"private")]
        pub.disconnect()
    sub.disconnect()

    bus = MqttBus(any_broker.url, client_id=uid("bus"))
    seen: list[str] = []
    bus.subscribe(f"{root}/#", lambda t, _p: seen.append(t))
    with pytest.raises(ValueError, match="'.'"):
        bus.subscribe(f"{root}/ann.state", lambda t, _p: None)
    task = asyncio.create_task(bus.run())
    try:
        await asyncio.wait_for(bus.wait_connected(), 15)
        with pytest.raises(BusError, match="'.'"):
            await bus.publish(f"{root}/bob.state", b"x")
        with pytest.raises(BusError, match="QoS 2"):
            await bus.publish(f"{root}/ok", b"x", qos=2)
        # the backend's own path (a future, no Task): the same checks, the same errors
        with pytest.raises(BusError, match="'.'"):
            await bus.publish_nowait(f"{root}/bob.state", b"x")
        with pytest.raises(BusError, match="QoS 2"):
            await bus.publish_nowait(f"{root}/ok", b"x", qos=2)
        await bus.publish(f"{root}/ok", b"y")  # the connection is intact
        await bus.publish_nowait(f"{root}/ok", b"z")  # resolved by the PUBACK
        await wait_until(lambda: seen == [f"{root}/ok", f"{root}/ok"], what="the good topic delivered")
        assert bus.reconnects == 0
    finally:
        await cancel_and_wait(task)


def test_qos_2_is_granted_as_qos_1_on_rabbitmq_and_nats(any_broker: BrokerProcess) -> None:
    """The backend publishes and subscribes at QoS 1 only: RabbitMQ 3.10 downgrades QoS 2 to 1, and
    NATS 2.9 grants 1 (and closes a connection that publishes at QoS 2)."""
    sub = RawClient(any_broker.port, uid("q2"))
    granted = sub.subscribe(f"q2/{uid('t')}", qos=2)
    assert granted == {"mosquitto": 2, "rabbitmq": 1, "nats": 1}[any_broker.kind]
    sub.disconnect()


def test_unacknowledged_messages_of_a_persistent_session(any_broker: BrokerProcess) -> None:
    """A persistent session's unacknowledged QoS 1 messages are sent again (DUP) when it reconnects,
    on Mosquitto and RabbitMQ; NATS 2.9 sends them again only once its ``ack_wait`` (30 s) has
    passed, so a message published after the reconnect overtakes them (its known issues:
    redelivery out of the original order, no redelivery at reconnect). The backend's consumers
    key every result by its idempotency key, never by order (docs/brokers.md)."""
    port, topic = any_broker.port, f"u/{uid('t')}"
    me = uid("settle")
    sub = RawClient(port, me, clean=False)
    assert sub.subscribe(topic) == 1
    pub = RawClient(port, uid("pub"))
    for i in range(5):
        acked(pub, topic, str(i).encode())
    first = sub.publishes(5, timeout=10)
    assert [p.payload for p in first] == [b"0", b"1", b"2", b"3", b"4"]
    for p in first:
        if int(p.payload) % 2:
            assert p.packet_id is not None
            sub.puback(p.packet_id)  # 1 and 3 acknowledged; 0, 2, 4 not
    acked(pub, f"{topic}-sync", b"")  # a round trip, so the acks are in before the client vanishes
    sub.vanish()

    again = RawClient(port, me, clean=False)
    assert again.session_present
    acked(pub, topic, b"5")
    pub.disconnect()
    want = 1 if any_broker.kind == "nats" else 4  # NATS: nothing comes again before ack_wait
    got = []
    while len(got) < want and (batch := again.publishes(1, timeout=10)):
        got += batch
    if any_broker.kind == "nats":
        assert [p.payload for p in got] == [b"5"]
    else:
        redelivered = [p for p in got if p.payload != b"5"]
        assert [(p.payload, p.dup) for p in redelivered] == [(b"0", True), (b"2", True), (b"4", True)]
        assert b"5" in [p.payload for p in got]
    again.disconnect()


def test_nats_sends_unacknowledged_messages_again_after_ack_wait_behind_newer_ones(tmp_path: Path) -> None:
    """The other half of NATS's redelivery: with a short ``ack_wait`` they do come again, after a
    message that was published later (out of the original order)."""
    nats = NatsProcess(tmp_path, ack_wait=0.5)
    nats.start()
    try:
        topic, me = f"u/{uid('t')}", uid("settle")
        sub = RawClient(nats.port, me, clean=False)
        sub.subscribe(topic)
        pub = RawClient(nats.port, uid("pub"))
        for i in range(3):
            acked(pub, topic, str(i).encode())
        assert [p.payload for p in sub.publishes(3, timeout=10)] == [b"0", b"1", b"2"]
        sub.vanish()  # nothing acknowledged
        again = RawClient(nats.port, me, clean=False)
        acked(pub, topic, b"3")
        got = again.publishes(4, timeout=30)
        assert [p.payload for p in got][0] == b"3"  # the newer one first ...
        assert sorted(p.payload for p in got[1:]) == [b"0", b"1", b"2"] and all(p.dup for p in got[1:])  # ... then these
        again.disconnect()
        pub.disconnect()
    finally:
        nats.kill()


def test_a_will_fires_retained_and_a_second_connection_takes_the_client_id_over(any_broker: BrokerProcess) -> None:
    """The backend's status relies on both: a dead backend's will marks it offline (retained), and
    a restarted one (same client id) takes its session over at once. Alike on all three."""
    port, status = any_broker.port, f"s/{uid('node')}/status"
    dying = RawClient(port, uid("backend"), will=(status, json.dumps({"online": False}).encode(), 1, True))
    dying.vanish()
    # The broker fires the will when it sees the connection gone, which may come after a watcher
    # subscribed: then it arrives live (retain flag off). What matters is that it is kept: a
    # fresh watcher is asked until one gets it as a retained message (ten watchers, 1 s each).
    for _ in range(10):
        watcher = RawClient(port, uid("watch"))
        watcher.subscribe(status)
        got = watcher.publishes(1, timeout=1)
        watcher.disconnect()
        assert [p.payload for p in got] in ([], [b'{"online": false}']), got
        if got and got[0].retain:
            break
    else:
        raise AssertionError("the will was never kept as a retained message")

    same = uid("dealer-n1")
    old = RawClient(port, same)
    new = RawClient(port, same)
    assert old.closed_by_broker()
    new.disconnect()


def test_after_a_broker_kill_queued_messages_and_retained_ones(any_broker: BrokerProcess) -> None:
    """What a SIGKILL of the broker keeps. RabbitMQ (durable queues, confirmed before the PUBACK)
    and NATS (JetStream) keep every acknowledged message queued for a persistent session;
    Mosquitto writes its database after the PUBACK (autosave), so the last messages may be lost.
    Retained messages: NATS keeps them; Mosquitto may lose the last; RabbitMQ 3.10's retained
    store (dets, saved every few minutes) may lose them. The backend copes: a result stays in its
    outbox until settlement acknowledges it, and every reconnect publishes all retained messages
    again (tests/test_integration.py, tests/test_result_acks.py run on all three)."""
    port, topic, me = any_broker.port, f"k/{uid('t')}", uid("settle")
    sub = RawClient(port, me, clean=False)
    sub.subscribe(topic)
    sub.disconnect()
    pub = RawClient(port, uid("pub"))
    for i in range(5):
        acked(pub, topic, str(i).encode())
    acked(pub, f"{topic}/retained", b"kept?", retain=True)
    pub.disconnect()
    any_broker.kill()
    any_broker.start()
    again = RawClient(port, me, clean=False)
    got = [p.payload for p in again.publishes(5, timeout=10)]
    all_five = [str(i).encode() for i in range(5)]
    if any_broker.kind == "mosquitto":
        assert got == all_five[:len(got)]  # in order, the last ones may be missing
    else:
        assert got == all_five
    again.disconnect()
    late = RawClient(port, uid("late"))
    late.subscribe(f"{topic}/retained")
    kept = [p.payload for p in before_marker(port, late, f"{topic}/retained")]
    assert kept in ([b"kept?"], []) if any_broker.kind != "nats" else kept == [b"kept?"]
    late.disconnect()


async def test_a_station_that_starts_mid_deal_shows_the_current_prompt_on_every_broker(
        any_broker: BrokerProcess) -> None:
    """``dealer station`` subscribes to every backend's status with a wildcard, which RabbitMQ
    3.10 answers with no retained message; so, seeing a retained state (carrying the current
    prompt) from a node whose status it has not heard, it asks for that node's status by its
    exact topic, and the prompt shows."""
    from dealer.cli.client_options import BrokerOptions
    from tools.station import run_station

    node, table = uid("n"), f"S{uuid.uuid4().hex[:6]}"
    prompt = {"table_id": table, "round_id": f"{table}-x-000001", "kind": "NEXT", "message": "deal B1 (face down)",
              "position": "B1", "step": 2, "of": 6, "at": 5, "schema_id": "studio.v1.prompt"}
    current = {"table_id": table, "schema_id": "studio.v1.table_state", "node_id": node, "session": "s1.1",
               "version": 7, "stale": False, "prompt": prompt, "events": [], "prompts": []}
    backend = RawClient(any_broker.port, uid("backend"))
    acked(backend, f"studio/v1/backends/{node}/status", b'{"online": true, "session": "s1.1"}', retain=True)
    acked(backend, f"studio/v1/tables/{table}/state", json.dumps(current).encode(), retain=True)
    backend.disconnect()

    lines: asyncio.Queue[str | None] = asyncio.Queue()
    for line in ("wait NEXT B1 20", "quit"):
        lines.put_nowait(line)

    class Out:
        text = ""

        def write(self, s: str) -> None:
            self.text += s

        def flush(self) -> None:
            pass

    out = Out()
    opts = BrokerOptions(any_broker.url, None, None, None, 10.0)
    status = await run_station(opts, table, client_id=uid("station"), out=out, lines=lines)  # type: ignore[arg-type]
    assert status == 0, out.text
    assert "NEXT    | deal B1 (face down)  [step 2/6]" in out.text
