"""What a browser page received on the wire: the MQTT stream its WebSocket carried, parsed.

The pages speak MQTT over a WebSocket that ``dealer web`` forwards to the broker byte for byte,
so the bytes the browser received (Playwright's ``framereceived``) are the broker's MQTT packets.
A WebSocket message may hold part of a packet or several: the frames are joined in order and
read as one stream. Only PUBLISH packets are kept (topic and payload)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple


class Received(NamedTuple):
    topic: str
    payload: bytes
    retain: bool

    def json(self) -> Any:
        try:
            return json.loads(self.payload)
        except ValueError:
            return None


def publishes(frames: Iterable[bytes]) -> Iterator[Received]:
    """Every PUBLISH in the MQTT 3.1.1 byte stream ``frames`` (server to client)."""
    data = b"".join(frames)
    i = 0
    while i < len(data):
        header = data[i]
        length, mult, j = 0, 1, i + 1
        while True:
            if j >= len(data):
                return  # a packet cut off at the end of the recording
            b = data[j]
            length += (b & 0x7F) * mult
            mult *= 128
            j += 1
            if not b & 0x80:
                break
        body = data[j:j + length]
        if len(body) < length:
            return
        i = j + length
        if header >> 4 != 3:  # not a PUBLISH (CONNACK, SUBACK, PUBACK, PINGRESP ...)
            continue
        qos = (header >> 1) & 3
        tlen = int.from_bytes(body[:2], "big")
        topic = body[2:2 + tlen].decode()
        start = 2 + tlen + (2 if qos else 0)
        yield Received(topic, bytes(body[start:]), bool(header & 1))


def card_fields(msg: Any) -> Iterator[tuple[str, str]]:
    """(position, code) for every card a table message shows: an event's ``card`` (with its
    ``position``), any ``cards`` map, and the ``cards`` lists of the hands a showdown names."""
    if isinstance(msg, dict):
        if isinstance(msg.get("position"), str) and isinstance(msg.get("card"), str):
            yield msg["position"], msg["card"]
        cards = msg.get("cards")
        if isinstance(cards, dict):
            for pos, code in cards.items():
                if isinstance(code, str):
                    yield str(pos), code
        elif isinstance(cards, list) and isinstance(msg.get("positions"), list):
            for pos, code in zip(msg["positions"], cards):
                if isinstance(code, str):
                    yield str(pos), code
        for v in msg.values():
            yield from card_fields(v)
    elif isinstance(msg, list):
        for v in msg:
            yield from card_fields(v)


__all__ = ["Received", "card_fields", "publishes"]
