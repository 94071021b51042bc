"""Test harness: a table whose scanner is an MQTT gateway. The settings of such a table, and
the one gateway (numbered scanner messages on the table's scanner topic) that tests drive by
hand, over a recorder's bus or a role's own credentials."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from dealer.edge import topics
from dealer.edge.config import load_settings
from drivers.scanner_json import ScannerMessage
from tests.harness import TABLE

GATEWAY_READER = "GW1"


def mqtt_settings(tmp: Path, url: str | None, **table):
    cfg = {"id": TABLE, "game": "teen-patti", "betting_seconds": 0.3, "pause_seconds": 0.1,
           "scanner": {"kind": "mqtt", "reader_id": GATEWAY_READER, "heartbeat_timeout": 30}}
    cfg.update(table)
    return load_settings(service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False, "node_id": "n1"},
                         mqtt={"url": url, "client_id": "backend-mqtt-test"}, tables=[cfg])


class Gateway:
    """A table's scanner gateway: each read takes the next seq; a heartbeat or a boot carries
    the last used one unless told otherwise (``advance``, ``seq``). ``publish`` is how its
    bytes reach the broker (a recorder's bus, or a role's own client)."""

    def __init__(self, publish: Callable[[str, bytes], Awaitable[Any]], reader: str = GATEWAY_READER,
                 table: str = TABLE) -> None:
        self.publish, self.reader, self.table, self.seq = publish, reader, table, 0

    async def send(self, status: str, payload: str = "", *, advance: bool | None = None,
                   seq: int | None = None) -> None:
        if advance if advance is not None else status not in ("HB", "BOOT"):
            self.seq += 1
        msg = ScannerMessage(reader=self.reader, seq=self.seq if seq is None else seq, status=status,  # type: ignore[arg-type]
                             payload=payload)
        await self.publish(topics.scanner(self.table), msg.model_dump_json().encode())

    async def beat(self) -> None:
        """BOOT, then a heartbeat every 0.3 s (the reader's link up) until cancelled."""
        await self.send("BOOT")
        while True:
            await self.send("HB")
            await asyncio.sleep(0.3)
