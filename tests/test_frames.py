"""Frame codec, stream decoder and sequence rules; the doc's test vectors are checked here."""

from __future__ import annotations

import ast
import re
import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.frames import (
    FAULT_CODES,
    MAX_FRAME_LEN,
    SEQ_MOD,
    Frame,
    FrameDecoder,
    FrameError,
    ReaderSession,
    Status,
    compute_mac,
    crc16,
    decode_frame,
    encode_frame,
    error_input,
)
from drivers.scan import ScanInput, ScanKind
from tests.harness_docs import SCANNER_PROTOCOL as DOC, doc_table, parse_inputs

# --- the doc's vectors ------------------------------------------------------------------


def describe(items: list[Frame | FrameError], garbage: int) -> str:
    out = []
    for item in items:
        if isinstance(item, FrameError):
            out.append(f"ERROR {item.reason}")
        else:
            out.append(" ".join(filter(None, ["FRAME", item.reader, str(item.seq),
                                              str(item.status), item.payload,
                                              item.boot is not None and f"[boot {item.boot}]"])))
    if garbage:
        out.append(f"GARBAGE {garbage}")
    return " ; ".join(out)


BYTE_VECTORS = doc_table("### 9.1 Byte vectors")


def test_doc_has_enough_byte_vectors() -> None:
    reasons = {cell for row in BYTE_VECTORS for cell in row[2].split(" ; ")}
    assert len(BYTE_VECTORS) >= 8
    assert {"ERROR crc", "ERROR syntax", "ERROR torn"} <= reasons
    assert any("GARBAGE" in row[2] and "FRAME" in row[2] for row in BYTE_VECTORS)


@pytest.mark.parametrize("row", BYTE_VECTORS, ids=[r[0] for r in BYTE_VECTORS])
def test_doc_byte_vector(row: list[str]) -> None:
    _, wire, expected, _meaning = row
    data = ast.literal_eval(wire)
    decoder = FrameDecoder()
    got = describe(decoder.feed(data), decoder.garbage_bytes)
    assert got == ("" if expected == "(nothing)" else expected)
    # Byte by byte gives the same result: chunk boundaries never matter.
    decoder = FrameDecoder()
    items = [item for i in range(len(data)) for item in decoder.feed(data[i : i + 1])]
    assert describe(items, decoder.garbage_bytes) == got


@pytest.mark.parametrize("row", [r for r in BYTE_VECTORS if r[2].startswith("FRAME")
                                 and "GARBAGE" not in r[2]])
def test_doc_valid_vectors_are_what_encode_produces(row: list[str]) -> None:
    data = ast.literal_eval(row[1])
    frame = decode_frame(data)
    assert encode_frame(frame).rstrip(b"\r\n") == data.rstrip(b"\r\n")


def test_doc_signed_vector_carries_the_mac_of_its_key() -> None:
    frame = decode_frame(ast.literal_eval(next(r[1] for r in BYTE_VECTORS if "[boot" in r[2])))
    k1 = bytes(range(32))  # key K1 of the doc's 9.3 (also checked there)
    assert frame.boot == 7 and frame.mac == compute_mac(k1, b"SC1,1,OK,AS", 7)
    assert frame.mac.startswith("829f61d8") and "829f61d8e9e9f2da22ee6755a2aedd101a4ecd099887469f79e94cd13f55a9b0" in DOC.read_text()


SEQ_VECTORS = doc_table("### 9.2 Sequence vectors")


@pytest.mark.parametrize("row", SEQ_VECTORS, ids=[r[3] for r in SEQ_VECTORS])
def test_doc_sequence_vector(row: list[str]) -> None:
    frames_in, inputs_out, counters, _rule = row
    session = ReaderSession("SC1")
    got: list[ScanInput] = []
    for ns, (status, seq, payload) in enumerate(parse_inputs(frames_in), start=1):
        got += session.accept(Frame("SC1", seq, Status(status), payload), received_ns=ns)
    assert [(i.kind.value, i.seq, i.code if i.kind is ScanKind.OK else i.detail)
            for i in got] == parse_inputs(inputs_out)
    assert all(i.reader == "SC1" and i.received_ns > 0 for i in got)
    expected = {"repeats": 0, "restarts": 0, "boots": 0, "lost": 0, "late": 0}
    expected |= {k: int(v) for k, v in (kv.split("=") for kv in shlex.split(counters))}
    assert {k: getattr(session, k) for k in expected} == expected


def test_crc_check_value_is_in_the_doc() -> None:
    assert crc16(b"123456789") == 0x29B1
    assert re.search(r"`123456789` is \*\*0x29B1\*\*", DOC.read_text(encoding="utf-8"))


def crc_ccitt_false_bitwise(data: bytes) -> int:
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


@given(st.binary(max_size=80))
def test_crc16_is_ccitt_false(data: bytes) -> None:
    assert crc16(data) == crc_ccitt_false_bitwise(data)


# --- codec ------------------------------------------------------------------------------

_UP_DIGIT = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_PAYLOADS = {
    Status.OK: st.text(_UP_DIGIT, min_size=2, max_size=4),
    Status.NOREAD: st.just(""),
    Status.MISREAD: st.text(_UP_DIGIT + "?", max_size=8),
    Status.FAULT: st.sampled_from(sorted(FAULT_CODES)),
    Status.HB: st.just(""),
    Status.BOOT: st.text(_UP_DIGIT + "abcxyz.-", max_size=16),
}


@st.composite
def frames(draw: st.DrawFn, reader: str | None = None) -> Frame:
    status = draw(st.sampled_from(list(Status)))
    seq = 0 if status is Status.BOOT else draw(st.integers(0, SEQ_MOD - 1))
    rid = reader or draw(st.text(_UP_DIGIT + "-", min_size=1, max_size=16))
    frame = Frame(rid, seq, status, draw(_PAYLOADS[status]))
    if draw(st.booleans()):
        frame = frame.sign(draw(st.binary(min_size=16, max_size=64)), draw(st.integers(0, SEQ_MOD - 1)))
    return frame


@given(frames())
def test_encode_decode_round_trip(frame: Frame) -> None:
    wire = encode_frame(frame)
    assert len(wire) <= MAX_FRAME_LEN and wire.startswith(b"$") and wire.endswith(b"\r\n")
    assert decode_frame(wire) == frame
    assert decode_frame(wire[:-2] + b"\n") == frame


@pytest.mark.slow
@given(st.lists(frames(), max_size=12), st.data())
def test_any_chunking_gives_the_same_frames(items: list[Frame], data: st.DataObject) -> None:
    stream = b"".join(encode_frame(f) for f in items)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    decoder = FrameDecoder()
    got = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)]):
        got += decoder.feed(stream[a:b])
    assert got == items
    assert decoder.garbage_bytes == 0


@given(st.binary(max_size=300), st.lists(st.integers(1, 40), max_size=10), frames())
def test_garbage_never_raises_and_the_next_frame_still_arrives(
    noise: bytes, sizes: list[int], frame: Frame
) -> None:
    decoder = FrameDecoder()
    pos = 0
    for size in [*sizes, len(noise)]:
        for item in decoder.feed(noise[pos : pos + size]):
            assert isinstance(item, Frame | FrameError)
        pos += size
    assert decoder.feed(encode_frame(frame))[-1] == frame


_MAC = "829f61d8e9e9f2da22ee6755a2aedd101a4ecd099887469f79e94cd13f55a9b0"


def _crc(inner: bytes) -> bytes:
    return b"$" + inner + b"*" + f"{crc16(inner):04X}".encode() + b"\r\n"


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (b"$SC1,1,OK,AS*77EE\r\n", "bad CRC: frame says 77EE, computed 77EF"),
        (_crc(b"SC1,1,OK,AS;7;" + _MAC.upper().encode()), "MAC '829F61D8"),
        (_crc(b"SC1,1,OK,AS;7;" + _MAC[:-1].encode()), "must be 64 lowercase hex digits"),
        (_crc(b"SC1,1,OK,AS;7;" + _MAC.encode() + b";1"), "must be 64 lowercase hex digits"),
        (_crc(b"SC1,1,OK,AS;" + _MAC.encode()), "a signature must be ';<boot>;<mac>'"),
        (_crc(b"SC1,1,OK,AS;;" + _MAC.encode()), "boot counter '' must be a decimal number"),
        (_crc(b"SC1,1,OK,AS;4294967296;" + _MAC.encode()), "boot counter 4294967296 must be an integer"),
        (_crc(b"SC1,1,OK;7;" + _MAC.encode()), "expected 4 comma-separated fields, got 3"),
        (b"SC1,1,OK,AS*77EF\r\n", "must start with '$'"),
        (b"$SC1,1,OK,AS\r\n", "no '*'"),
        (b"$SC1,1,OK,AS*77ef\r\n", "4 uppercase hex digits"),
        (b"$SC1,5,WIN,AS*DF5F\r\n", "unknown status 'WIN'"),
        (b"$SC1,05,OK,AS*7CA8\r\n", "without leading zeros"),
        (b"$SC1,2,NOREAD,AS*F0DC\r\n", "NOREAD payload 'AS' is invalid: must be empty"),
        (b"$SC1,1,OK,A\xc3\x9f*8BCD\r\n", "byte 0xC3 at offset 11 is not printable ASCII"),
    ],
)
def test_decode_errors_say_what_is_wrong(wire: bytes, message: str) -> None:
    with pytest.raises(FrameError, match=re.escape(message)) as info:
        decode_frame(wire)
    assert info.value.raw == wire


def test_frame_validates_its_fields() -> None:
    with pytest.raises(FrameError, match="reader id"):
        Frame("sc1", 1, Status.OK, "AS")
    with pytest.raises(FrameError, match="seq"):
        Frame("SC1", SEQ_MOD, Status.OK, "AS")
    with pytest.raises(FrameError, match="BOOT frame must carry seq 0"):
        Frame("SC1", 3, Status.BOOT, "1.0")
    with pytest.raises(FrameError, match="FAULT payload 'FIRE'"):
        Frame("SC1", 3, Status.FAULT, "FIRE")
    with pytest.raises(FrameError, match="both a boot counter and a MAC"):
        Frame("SC1", 1, Status.OK, "AS", boot=7)
    with pytest.raises(FrameError, match="both a boot counter and a MAC"):
        Frame("SC1", 1, Status.OK, "AS", mac=_MAC)
    with pytest.raises(FrameError, match="boot counter -1"):
        Frame("SC1", 1, Status.OK, "AS", boot=-1, mac=_MAC)
    with pytest.raises(FrameError, match="64 lowercase hex"):
        Frame("SC1", 1, Status.OK, "AS", boot=7, mac=_MAC.upper())
    assert Frame("SC1", 1, "OK", "AS").status is Status.OK  # type: ignore[arg-type]


def test_seq_above_32_bits_is_rejected() -> None:
    body = b"SC1,4294967296,OK,AS"
    with pytest.raises(FrameError, match="seq"):
        decode_frame(b"$" + body + b"*" + f"{crc16(body):04X}".encode() + b"\r\n")


def test_overlong_line_is_rejected_by_decode_frame() -> None:
    with pytest.raises(FrameError, match="over the 128-byte limit") as info:
        decode_frame(b"$" + b"A" * 130 + b"\r\n")
    assert info.value.reason == "overlong"


def test_the_128_byte_limit_includes_the_line_end() -> None:
    assert MAX_FRAME_LEN == 128 and "at most **128 bytes**" in DOC.read_text(encoding="utf-8")
    decoder = FrameDecoder()
    at_limit = decoder.feed(b"$" + b"A" * 126 + b"\n")  # 128 bytes: decoded (and rejected)
    over = decoder.feed(b"$" + b"A" * 127 + b"\n")  # 129 bytes: never decoded
    assert [e.reason for e in at_limit + over] == ["syntax", "overlong"]
    # The doc's figures: the longest unsigned frame is 52 bytes, the longest signed one 128.
    for payloads in ([(Status.MISREAD, "ABCDEFGH"), (Status.FAULT, "COVER_OPEN")],):
        for status, payload in payloads:
            longest = Frame("R" * 16, SEQ_MOD - 1, status, payload)
            assert len(encode_frame(longest)) == 52
            signed = longest.sign(b"k" * 32, SEQ_MOD - 1)
            assert len(encode_frame(signed)) == MAX_FRAME_LEN
            assert decode_frame(encode_frame(signed)) == signed
    assert len(encode_frame(Frame("R" * 16, 0, Status.BOOT, "v" * 16).sign(b"k" * 32, SEQ_MOD - 1))) < 128


def test_unsigned_frames_keep_their_version_1_bytes() -> None:
    frame = Frame("SC1", 1, Status.OK, "AS")
    assert encode_frame(frame) == b"$SC1,1,OK,AS*77EF\r\n" and not frame.signed
    signed = frame.sign(bytes(range(32)), 7)
    assert signed.signed and signed.body == frame.body and signed != frame
    assert encode_frame(signed) == b"$SC1,1,OK,AS;7;" + _MAC.encode() + b"*7886\r\n"


# --- sequence rules beyond the doc table -------------------------------------------------


def test_session_rejects_a_frame_of_another_reader() -> None:
    with pytest.raises(ValueError, match="'SC2' given to the session of 'SC1'"):
        ReaderSession("SC1").accept(Frame("SC2", 1, Status.OK, "AS"), 1)


def test_heartbeat_and_boot_update_liveness_and_firmware() -> None:
    session = ReaderSession("SC1")
    assert session.accept(Frame("SC1", 0, Status.BOOT, "2.1.0"), 10) == []
    assert session.accept(Frame("SC1", 0, Status.HB), 20) == []
    assert (session.firmware, session.last_heartbeat_ns, session.last_seen_ns) == ("2.1.0", 20, 20)
    assert session.last_seq == 0


def test_error_input_is_corrupt_with_the_reason() -> None:
    err = FrameError("bad CRC: frame says 77EE, computed 77EF", reason="crc")
    assert error_input("SC1", err, 42) == ScanInput(
        "SC1", ScanKind.CORRUPT, detail="bad CRC: frame says 77EE, computed 77EF", received_ns=42
    )


@given(st.lists(st.tuples(st.sampled_from(["send", "drop", "repeat", "hb"]),
                          st.sampled_from(["AS", "KH", "01G"])), max_size=40),
       st.integers(0, SEQ_MOD - 1))
def test_session_accounts_for_every_frame(script: list[tuple[str, str]], start: int) -> None:
    """Whatever the line does, each sent frame yields exactly its input, each dropped frame is
    reported LOST before the next frame that arrives, and repeats yield nothing."""
    session = ReaderSession("SC1")
    seq = start
    got = session.accept(Frame("SC1", seq, Status.HB), 0)
    expected: list[tuple[str, int]] = []
    pending_lost: list[int] = []  # seqs sent but lost on the line, oldest first
    last: Frame | None = None  # the last scan result the reader sent

    def deliver(frame: Frame) -> None:
        nonlocal got, pending_lost
        if pending_lost:
            expected.append(("LOST", pending_lost[0]))
            pending_lost = []
        got += session.accept(frame, 0)

    for action, code in script:
        if action == "hb":
            deliver(Frame("SC1", seq, Status.HB))
        elif action == "repeat" and last is not None:
            if pending_lost and pending_lost[-1] == last.seq:
                pending_lost.pop()  # the retransmission delivers the lost original
                deliver(last)
                expected.append(("OK", last.seq))
            else:
                got += session.accept(last, 0)  # a duplicate: dropped
        elif action in ("send", "drop"):
            seq = (seq + 1) % SEQ_MOD
            last = Frame("SC1", seq, Status.OK, code)
            if action == "drop":
                pending_lost.append(seq)
            else:
                deliver(last)
                expected.append(("OK", seq))
    assert [(i.kind.value, i.seq) for i in got] == expected
    assert session.restarts == 0
