"""A QoS 1 publish's PUBACK, or its timeout, over a real broker that stops answering.

``MqttBus.publish_nowait`` (every live and retained message of the backend) hands a message to
paho and returns the future of its PUBACK. A broker that hangs (SIGSTOP: the connection stays
open, nothing answers) must fail that future with ``BusError`` after the publish timeout, and
leave nothing behind in the client's table of pending publishes; one that answers resolves it
and leaves nothing either."""

from __future__ import annotations

import asyncio

import pytest

from drivers.bus import BusError
from drivers.mqtt import MqttBus, cancel_and_wait
from tests.conftest import Broker


async def test_a_publish_fails_after_its_timeout_when_the_broker_hangs_and_is_forgotten(broker: Broker) -> None:
    bus = MqttBus(broker.url, client_id="acks-test", publish_timeout=0.5)
    task = asyncio.create_task(bus.run())
    try:
        await asyncio.wait_for(bus.wait_connected(), 10)
        client = bus._client
        assert client is not None
        await asyncio.wait_for(bus.publish_nowait("t/acks", b"answered", qos=1), 5)  # PUBACK: resolved
        assert not client._pending_publishes
        broker.pause()
        try:
            hung = bus.publish_nowait("t/acks", b"never answered", qos=1)
            assert len(client._pending_publishes) == 1
            with pytest.raises(BusError, match="timed out"):
                await asyncio.wait_for(hung, 5)  # fails at its own timeout, well before this one
            assert not client._pending_publishes, "a timed-out publish stays pending"
        finally:
            broker.resume()
    finally:
        await cancel_and_wait(task)
