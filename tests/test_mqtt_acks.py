"""A QoS 1 publish's PUBACK, or its timeout, over a real broker that stops answering.

``MqttBus.publish_nowait`` (every live and retained message of the backend) hands a message to
the MQTT client (gmqtt by default, paho for a rollback: both are run) and returns the future of
its PUBACK. A broker that hangs (SIGSTOP: the connection stays
open, nothing answers) must fail that future with ``BusError`` after the publish timeout, and
leave nothing behind in the client's table of pending publishes; one that answers resolves it
and leaves nothing either."""

from __future__ import annotations

import asyncio

import pytest

from drivers.bus import BusError
from drivers.mqtt import CLIENTS, MqttBus, cancel_and_wait
from tests.conftest import Broker


@pytest.mark.parametrize("library", CLIENTS)
async def test_a_publish_fails_after_its_timeout_when_the_broker_hangs_and_is_forgotten(
        broker: Broker, library: str) -> None:
    bus = MqttBus(broker.url, client_id="acks-test", publish_timeout=0.5, client=library)
    task = asyncio.create_task(bus.run())
    try:
        await asyncio.wait_for(bus.wait_connected(), 10)
        client = bus._client
        assert client is not None
        await asyncio.wait_for(bus.publish_nowait("t/acks", b"answered", qos=1), 5)  # PUBACK: resolved
        assert not client.pending
        broker.pause()
        try:
            hung = bus.publish_nowait("t/acks", b"never answered", qos=1)
            assert client.pending == 1
            with pytest.raises(BusError, match="timed out"):
                await asyncio.wait_for(hung, 5)  # fails at its own timeout, well before this one
            assert not client.pending, "a timed-out publish stays pending"
        finally:
            broker.resume()
    finally:
        await cancel_and_wait(task)


async def test_a_publish_waiting_for_its_puback_fails_at_once_when_the_connection_is_lost(broker: Broker) -> None:
    """gmqtt: a message not acknowledged when its connection ends fails then, not after its
    timeout (nothing more will be acknowledged on that connection; the bus reconnects)."""
    bus = MqttBus(broker.url, client_id="acks-lost", publish_timeout=60)
    task = asyncio.create_task(bus.run())
    try:
        await asyncio.wait_for(bus.wait_connected(), 10)
        client = bus._client
        assert client is not None
        broker.pause()
        hung = bus.publish_nowait("t/acks", b"never answered", qos=1)
        assert client.pending == 1
        broker.kill()
        with pytest.raises(BusError, match="no PUBACK"):
            await asyncio.wait_for(hung, 10)
        assert client.pending == 0
    finally:
        await cancel_and_wait(task)
