"""The virtual shoe speaks the protocol, and its faults cost a rescan exactly when they should."""

from __future__ import annotations

import os
import random
import select

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.core.cards import HWATU_48, STANDARD_52
from drivers.frames import SEQ_MOD, Frame, FrameDecoder, ReaderSession, Status, decode_frame
from drivers.scan import ScanKind
from simulators.pty_port import PtyPort
from simulators.shoe import FAULTS, FaultPlan, VirtualShoe, shuffled


def test_shuffled_is_reproducible_and_a_permutation() -> None:
    a = shuffled(STANDARD_52, random.Random(7))
    assert a == shuffled(STANDARD_52, random.Random(7))
    assert sorted(a) == sorted(STANDARD_52) and a != list(STANDARD_52)


def test_shoe_frames_follow_the_sequence_rules() -> None:
    shoe = VirtualShoe("SC1", ["AS", "11JD"], firmware="2.1.0")
    assert decode_frame(shoe.boot()) == Frame("SC1", 0, Status.BOOT, "2.1.0")
    assert decode_frame(shoe.heartbeat()) == Frame("SC1", 0, Status.HB)
    assert decode_frame(shoe.scan(shoe.next_card())) == Frame("SC1", 1, Status.OK, "AS")
    assert decode_frame(shoe.noread()) == Frame("SC1", 2, Status.NOREAD)
    assert decode_frame(shoe.misread("A?")) == Frame("SC1", 3, Status.MISREAD, "A?")
    assert decode_frame(shoe.fault("JAM")) == Frame("SC1", 4, Status.FAULT, "JAM")
    assert decode_frame(shoe.heartbeat()) == Frame("SC1", 4, Status.HB)
    assert decode_frame(shoe.scan(shoe.next_card())) == Frame("SC1", 5, Status.OK, "11JD")
    with pytest.raises(IndexError, match="empty"):
        shoe.next_card()
    shoe.seq = SEQ_MOD - 1
    assert decode_frame(shoe.scan("KH")).seq == 0


def test_fault_helpers() -> None:
    shoe = VirtualShoe("SC1")
    good = shoe.scan("AS")
    assert shoe.repeated() == good
    assert shoe.dropped("KH") == b"" and shoe.seq == 2
    assert shoe.repeated() != good  # the dropped frame is the last the reader sent
    torn = shoe.torn("QH")
    assert torn.startswith(b"$SC1,3,") and not torn.endswith(b"\n")
    bad = shoe.bad_crc("JD")
    assert bad.endswith(b"\r\n") and shoe.seq == 4
    noise = shoe.garbage(500, random.Random(1))
    assert len(noise) == 500 and b"$" not in noise
    decoder = FrameDecoder()
    items = decoder.feed(noise + torn + bad + shoe.heartbeat())
    assert [getattr(i, "reason", None) for i in items] == ["torn", "crc", None]
    assert decoder.garbage_bytes == 500
    with pytest.raises(RuntimeError, match="nothing to repeat"):
        VirtualShoe("SC2").repeated()


def test_fault_plan_script_then_probabilities() -> None:
    plan = FaultPlan(script=["noread", "", "repeat"], drop=1.0)
    rng = random.Random(3)
    assert [plan.choose(rng) for _ in range(5)] == ["noread", "", "repeat", "drop", "drop"]
    with pytest.raises(ValueError, match="unknown faults"):
        FaultPlan(script=["fire"])
    with pytest.raises(ValueError, match="sum to at most 1"):
        FaultPlan(noread=0.6, torn=0.6)


def deal(deck: list[str], plan: FaultPlan, rng: random.Random) -> tuple[list[str], int, int]:
    """A virtual dealer against shoe -> decoder -> session, heartbeat after every pass (as an
    idle reader would). Returns (registered codes, passes, rescans needed)."""
    shoe = VirtualShoe("SC1", deck)
    decoder, session = FrameDecoder(), ReaderSession("SC1")
    registered: list[str] = []
    passes = rescans = 0

    def inputs(data: bytes) -> list:
        out = []
        for item in decoder.feed(data):
            if isinstance(item, Frame):
                out += session.accept(item, 0)
            else:
                out.append(item)
        return out

    inputs(shoe.boot())
    while shoe.deck:
        code = shoe.next_card()
        while True:
            passes += 1
            card_pass = plan.pass_card(shoe, code, rng)
            got = inputs(b"".join(card_pass.chunks) + shoe.heartbeat())
            oks = [i.code for i in got if getattr(i, "kind", None) is ScanKind.OK]
            assert oks == ([code] if card_pass.registers else []), (card_pass, got)
            if card_pass.registers:
                registered.append(code)
                break
            assert got, f"{card_pass.fault} must be visible to the backend"
            rescans += 1
    return registered, passes, rescans


@pytest.mark.parametrize("fault", ["", *FAULTS])
def test_each_fault_needs_a_rescan_except_noise_and_repeats(fault: str) -> None:
    plan = FaultPlan(script=[fault, "", ""])
    registered, passes, rescans = deal(["AS", "KH"], plan, random.Random(0))
    assert registered == ["AS", "KH"]
    expect_rescan = fault not in ("", "garbage", "repeat")
    assert rescans == (1 if expect_rescan else 0)
    assert passes == 2 + rescans


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32))
def test_a_faulty_shoe_still_deals_the_whole_deck_in_order(seed: int) -> None:
    rng = random.Random(seed)
    deck = shuffled(HWATU_48, rng)
    plan = FaultPlan(noread=0.05, misread=0.05, garbage=0.1, torn=0.05, bad_crc=0.05,
                     drop=0.05, repeat=0.1)
    registered, passes, rescans = deal(list(deck), plan, rng)
    assert registered == deck
    assert passes == len(deck) + rescans


@pytest.mark.integration
def test_pty_port_is_a_real_tty_behind_a_symlink(tmp_path) -> None:
    port = PtyPort(tmp_path, "shoe")
    try:
        first = port.device
        assert os.path.realpath(port.path) == first and first.startswith("/dev/pts/")
        fd = os.open(port.path, os.O_RDWR | os.O_NOCTTY)
        try:
            assert os.isatty(fd)
            port.write(b"$SC1,1,OK,AS*77EF\r\n")
            assert select.select([fd], [], [], 5)[0]
            assert os.read(fd, 100) == b"$SC1,1,OK,AS*77EF\r\n"  # raw: no CR/LF mangling
            port.unplug()
            assert not os.path.lexists(port.path) and port.write(b"x") == 0
            assert select.select([fd], [], [], 5)[0]  # hangup makes the old fd readable ...
            try:
                assert os.read(fd, 100) == b""  # ... as EOF (this kernel) ...
            except OSError as exc:  # ... or EIO (classic Linux behaviour)
                assert exc.errno == 5
        finally:
            os.close(fd)
        port.replug()
        assert os.path.realpath(port.path) == port.device
    finally:
        port.close()
    assert not os.path.lexists(port.path)


@pytest.mark.integration
def test_pty_port_drops_bytes_nobody_reads(tmp_path) -> None:
    with PtyPort(tmp_path) as port:
        sent = sum(port.write(b"x" * 4096) for _ in range(64))
        assert 0 < sent < 64 * 4096
        assert port.bytes_dropped == 64 * 4096 - sent
