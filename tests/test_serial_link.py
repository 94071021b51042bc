"""SerialScannerLink against a real pseudo-terminal (no mocks): reads, faults, unplug/replug."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from drivers.scan import LinkStatus, ScanInput, ScanKind
from drivers.serial_link import SerialScannerLink
from simulators.pty_port import PtyPort
from simulators.shoe import VirtualShoe

pytestmark = pytest.mark.integration  # real PTYs

WAIT = 10.0  # generous upper bound for any single condition; tests finish far sooner


@dataclass
class Recorder:
    """Collects callback values and lets a test wait for a condition on them."""

    inputs: list[ScanInput] = field(default_factory=list)
    links: list[LinkStatus] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def on_input(self, scan: ScanInput) -> None:
        self.inputs.append(scan)
        self._changed.set()

    def on_link(self, status: LinkStatus) -> None:
        self.links.append(status)
        self._changed.set()

    async def changed(self, at_most: float) -> None:
        """Return on the next callback, or after ``at_most`` seconds."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), at_most)

    async def until(self, condition: Callable[[], bool], timeout: float = WAIT) -> None:
        """Wait until ``condition()`` holds, re-checking on every callback (and every 20 ms,
        for conditions on the link's counters, which change without a callback)."""
        async with asyncio.timeout(timeout):
            while not condition():
                await self.changed(0.02)

    @property
    def up(self) -> bool:
        return bool(self.links) and self.links[-1].up

    def kinds(self) -> list[tuple[str, int | None, str | None]]:
        return [(i.kind.value, i.seq, i.code or i.detail or None) for i in self.inputs]


@dataclass
class Rig:
    port: PtyPort
    shoe: VirtualShoe
    rec: Recorder
    link: SerialScannerLink

    async def connect(self) -> None:
        """Heartbeat like an idle reader until the link reports up (the backend flushes
        whatever arrived before it opened the port, so we keep sending). Once up, the port
        is open, so every byte written from here on is read."""
        async with asyncio.timeout(WAIT):
            while not self.rec.up:
                self.port.write(self.shoe.heartbeat())
                await self.rec.changed(0.02)

    def send(self, *chunks: bytes) -> None:
        for chunk in chunks:
            self.port.write(chunk)


@contextlib.asynccontextmanager
async def rig(tmp_path, *, start_plugged: bool = True, rec: Recorder | None = None,
              **options) -> AsyncIterator[Rig]:
    port = PtyPort(tmp_path, "scanner")
    if not start_plugged:
        port.unplug()
    rec = rec or Recorder()
    options = {"backoff_initial": 0.01, "backoff_max": 0.05, "on_input": rec.on_input,
               "on_link": rec.on_link, **options}
    link = SerialScannerLink(port.path, **options)
    task = asyncio.create_task(link.run())
    try:
        yield Rig(port, VirtualShoe("SC1"), rec, link)
        assert not task.done(), "the link task must run until cancelled"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        port.close()


async def test_valid_reads_arrive_as_ok_inputs(tmp_path) -> None:
    async with rig(tmp_path, expected_reader="SC1") as r:
        await r.connect()
        # a protocol with heartbeats: the link is up once the reader is heard, not when the port opens
        assert r.rec.links == [LinkStatus(r.link.name, True, "reader heard")]
        assert r.link.name == f"serial:{r.port.path}"
        r.send(r.shoe.boot(), r.shoe.scan("AS"), r.shoe.scan("TD"), r.shoe.scan("11JD"))
        await r.rec.until(lambda: len(r.rec.inputs) == 3)
        assert r.rec.kinds() == [("OK", 1, "AS"), ("OK", 2, "TD"), ("OK", 3, "11JD")]
        assert all(i.reader == "SC1" and i.received_ns > 0 for i in r.rec.inputs)
        assert r.link.sessions["SC1"].boots == 1 and r.link.frames_bad == 0


async def test_garbage_between_frames_is_skipped_and_torn_frames_are_corrupt(tmp_path) -> None:
    async with rig(tmp_path) as r:
        await r.connect()
        noise = r.shoe.garbage(40, random.Random(5))
        r.send(r.shoe.scan("AS"), noise, r.shoe.scan("KH"), b"$#!\x00\xff", r.shoe.scan("QH"))
        await r.rec.until(lambda: any(i.code == "QH" for i in r.rec.inputs))
        kinds = r.rec.kinds()
        assert [k for k in kinds if k[0] == "OK"] == [("OK", 1, "AS"), ("OK", 2, "KH"),
                                                      ("OK", 3, "QH")]
        corrupt = [i for i in r.rec.inputs if i.kind is ScanKind.CORRUPT]
        assert len(corrupt) == 1 and corrupt[0].detail.startswith("torn frame")
        assert corrupt[0].reader == "SC1"  # attributed to the reader last heard on the link
        assert r.link.garbage_bytes >= 40 and r.link.frames_bad == 1


async def test_bad_crc_is_corrupt_and_the_lost_seq_is_reported(tmp_path) -> None:
    async with rig(tmp_path) as r:
        await r.connect()
        r.send(r.shoe.scan("AS"), r.shoe.bad_crc("KH"), r.shoe.scan("KH"))
        await r.rec.until(lambda: len(r.rec.inputs) == 4)
        assert [k[:2] for k in r.rec.kinds()] == [("OK", 1), ("CORRUPT", None), ("LOST", 2),
                                                 ("OK", 3)]
        assert r.rec.inputs[1].detail.startswith("bad CRC")


async def test_a_dropped_frame_yields_lost_before_the_next_ok(tmp_path) -> None:
    async with rig(tmp_path) as r:
        await r.connect()
        r.send(r.shoe.scan("AS"), r.shoe.dropped("KH"), r.shoe.dropped("QH"), r.shoe.scan("JD"))
        await r.rec.until(lambda: len(r.rec.inputs) == 3)
        assert r.rec.kinds() == [("OK", 1, "AS"), ("LOST", 2, "missing seq 2..3"),
                                 ("OK", 4, "JD")]


async def test_a_repeated_frame_is_dropped(tmp_path) -> None:
    async with rig(tmp_path) as r:
        await r.connect()
        r.send(r.shoe.scan("AS"), r.shoe.repeated(), r.shoe.repeated(), r.shoe.scan("KH"))
        await r.rec.until(lambda: any(i.code == "KH" for i in r.rec.inputs))
        assert r.rec.kinds() == [("OK", 1, "AS"), ("OK", 2, "KH")]
        assert r.link.sessions["SC1"].repeats == 2


async def test_unplug_and_replug_behind_the_same_symlink(tmp_path) -> None:
    async with rig(tmp_path) as r:
        await r.connect()
        r.send(r.shoe.scan("AS"))
        await r.rec.until(lambda: len(r.rec.inputs) == 1)

        r.port.unplug()
        await r.rec.until(lambda: not r.rec.up)
        assert len(r.rec.links) == 2 and r.rec.links[1].reason
        r.send(r.shoe.scan("KH"))  # the reader scans while the cable is out: lost
        await r.rec.until(lambda: r.link.open_failures >= 3)
        assert len(r.rec.links) == 2  # retries do not repeat the down report

        r.port.replug()
        await r.connect()
        r.send(r.shoe.scan("QH"))
        await r.rec.until(lambda: any(i.code == "QH" for i in r.rec.inputs))
        assert [link.up for link in r.rec.links] == [True, False, True]
        assert r.rec.kinds() == [("OK", 1, "AS"), ("LOST", 2, "missing seq 2"), ("OK", 3, "QH")]
        assert r.link.reconnects == 1


async def test_heartbeat_timeout_takes_the_link_down_until_the_reader_speaks(tmp_path) -> None:
    async with rig(tmp_path, heartbeat_timeout=0.2) as r:
        await r.connect()
        await r.rec.until(lambda: not r.rec.up)  # the reader falls silent
        assert r.rec.links[-1] == LinkStatus(r.link.name, False, "heartbeat timeout")
        # The port is reopened, but a silent reader does not make the link flap.
        await r.rec.until(lambda: r.link.reconnects >= 2)
        assert [link.up for link in r.rec.links] == [True, False]
        await r.connect()  # it speaks again
        assert r.rec.links[-1] == LinkStatus(r.link.name, True, "reader heard")
        r.send(r.shoe.scan("AS"))
        await r.rec.until(lambda: len(r.rec.inputs) == 1)
        assert [link.up for link in r.rec.links] == [True, False, True]


async def test_a_port_that_is_missing_at_start_is_reported_down_once(tmp_path) -> None:
    async with rig(tmp_path, start_plugged=False) as r:
        await r.rec.until(lambda: r.link.open_failures >= 3)
        assert len(r.rec.links) == 1 and not r.rec.links[0].up
        assert "cannot open" in r.rec.links[0].reason
        r.port.replug()
        await r.connect()
        assert r.link.reconnects == 0  # the first successful open is not a reconnect


async def test_frames_from_a_foreign_reader_are_corrupt(tmp_path) -> None:
    async with rig(tmp_path, expected_reader="SC1") as r:
        await r.connect()
        stranger = VirtualShoe("SC9")
        r.send(stranger.scan("AS"), r.shoe.scan("KH"))
        await r.rec.until(lambda: len(r.rec.inputs) == 2)
        foreign, ok = r.rec.inputs
        assert foreign.kind is ScanKind.CORRUPT and foreign.reader == "SC1"
        assert "'SC9'" in foreign.detail and "expected 'SC1'" in foreign.detail
        assert (ok.kind, ok.code) == (ScanKind.OK, "KH")
        assert "SC9" not in r.link.sessions and r.link.frames_bad == 1


async def test_a_raising_callback_does_not_kill_the_link(tmp_path, caplog) -> None:
    rec = Recorder()
    seen: list[ScanInput] = []

    def flaky(scan: ScanInput) -> None:
        seen.append(scan)
        if len(seen) == 1:
            raise RuntimeError("consumer bug")
        rec.on_input(scan)

    def broken_link(status: LinkStatus) -> None:
        rec.on_link(status)
        raise RuntimeError("consumer bug")

    async with rig(tmp_path, rec=rec, on_input=flaky, on_link=broken_link) as r:
        await r.connect()
        r.send(r.shoe.scan("AS"), r.shoe.scan("KH"))
        await r.rec.until(lambda: len(r.rec.inputs) == 1)
        assert [s.code for s in seen] == ["AS", "KH"]
        assert "on_input callback failed" in caplog.text
        assert "on_link callback failed" in caplog.text


async def test_an_open_port_with_a_silent_reader_is_not_up_and_goes_down_once(tmp_path) -> None:
    async with rig(tmp_path, heartbeat_timeout=0.2) as r:
        await r.rec.until(lambda: r.link.port_open)
        assert r.rec.links == []  # the port opened, but nobody spoke: not up
        await r.rec.until(lambda: r.link.reconnects >= 2)  # silent past the timeout, reopened twice
        assert r.rec.links == [LinkStatus(r.link.name, False, "heartbeat timeout")]
        await r.connect()
        assert [link.up for link in r.rec.links] == [False, True]


async def test_a_protocol_without_heartbeats_is_up_while_the_port_is_open(tmp_path) -> None:
    from simulators.beetek import BeeTekShoe

    async with rig(tmp_path, protocol="beetek", expected_reader="SC1", heartbeat_timeout=0.05) as r:
        await r.rec.until(lambda: r.rec.up)  # no byte was sent
        assert r.link.baudrate == 9600 and "no heartbeat" in r.rec.links[0].reason
        r.send(BeeTekShoe().card("TS"))
        await r.rec.until(lambda: len(r.rec.inputs) == 1)
        await r.rec.changed(0.3)  # a quiet shoe, six times its (ignored) heartbeat_timeout
        assert r.rec.kinds() == [("OK", None, "TS")] and [link.up for link in r.rec.links] == [True]
        r.port.unplug()
        await r.rec.until(lambda: not r.rec.up)
        assert len(r.rec.links) == 2
