"""The Bee-Tek shoe codec and the codec registry: pure calls, no IO (hypothesis for chunking)."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.core.cards import STANDARD_52
from drivers import codecs
from drivers.codecs import Notice
from drivers.codecs.beetek import (
    CARDS,
    MAX_BODY,
    MAX_ELEMENT,
    MAX_TAG,
    BeeTekCodec,
    Element,
    ElementDecoder,
    ElementError,
    interpret,
)
from drivers.frames import FrameAuthenticator
from drivers.scan import ScanInput, ScanKind
from simulators.beetek import FAULTS, BeeTekFaultPlan, BeeTekShoe

NOW = 1_000
DOC = Path(__file__).resolve().parents[1] / "docs" / "scanner-protocol.md"


def inputs(codec: BeeTekCodec, *chunks: bytes) -> list[tuple[str, str | None, bool, str]]:
    out = []
    for chunk in chunks:
        for item in codec.feed(chunk, NOW).items:
            if isinstance(item, ScanInput):
                assert item.reader == "SC1" and item.seq is None and item.received_ns == NOW
                out.append((item.kind.value, item.code, item.burn, item.detail))
    return out


def notices(codec: BeeTekCodec, data: bytes) -> list[Notice]:
    return [i for i in codec.feed(data, NOW).items if isinstance(i, Notice)]


# --- the registry and the declared capabilities --------------------------------------------


def test_the_registry_knows_both_protocols_and_what_each_can_detect() -> None:
    assert codecs.names() == ["beetek", "native"]
    native, beetek = codecs.codec("native").capabilities, codecs.codec("beetek").capabilities
    assert native.heartbeats and native.sequence_numbers and native.checksum and native.signing
    assert native.default_baudrate == 115200 and native.cards is None
    assert not (beetek.heartbeats or beetek.sequence_numbers or beetek.checksum or beetek.signing or beetek.reader_ids)
    assert beetek.burn_reads and beetek.default_baudrate == 9600
    assert beetek.cards == frozenset(STANDARD_52) == CARDS  # the rulebook's codes, "TS" for the ten
    with pytest.raises(ValueError, match=r"unknown scanner protocol 'acme' \(known: beetek, native\)"):
        codecs.codec("acme")


def test_a_codec_that_cannot_sign_or_name_its_reader_refuses_to_be_opened_wrongly() -> None:
    with pytest.raises(ValueError, match="cannot authenticate"):
        codecs.open_codec("beetek", "SC1", auth=FrameAuthenticator([bytes(32)]))
    with pytest.raises(ValueError, match="do not name their reader"):
        codecs.open_codec("beetek", None)
    assert isinstance(codecs.open_codec("beetek", "SC1"), BeeTekCodec)


# --- every element the shoe sends ----------------------------------------------------------


@pytest.mark.parametrize("code", sorted(CARDS))
def test_every_card_maps_to_the_rulebook_code(code: str) -> None:
    for ten in ("10", "T"):
        shoe = BeeTekShoe(ten=ten)
        codec = BeeTekCodec("SC1")
        assert inputs(codec, shoe.card(code), shoe.burn(code)) == [("OK", code, False, ""), ("OK", code, True, "")]
        assert codec.frames_ok == 2 and codec.burns == 1 and codec.frames_bad == 0 and codec.garbage_bytes == 0


def test_the_brief_examples_byte_for_byte() -> None:
    codec = BeeTekCodec("SC1")
    got = inputs(codec, b" [Game]<Card:4S> ", b" [Manual Burn Cards]<Card:4S> ", b" [Game]<Card:10H> ",
                 b" [Game]<Game> ", b" [Game]<Alarm:E3 Card Not Read> ", b" [GameAlarm]<Alarm:E7 Shoe Empty> ",
                 b" [Manual Burn Cards]<Game> ")
    assert got == [("OK", "4S", False, ""), ("OK", "4S", True, ""), ("OK", "TH", False, ""),
                   ("NOREAD", None, False, "the shoe could not read the card"),
                   ("FAULT", None, False, "shoe alarm: E3 Card Not Read"),
                   ("FAULT", None, False, "shoe alarm: E7 Shoe Empty"),
                   ("NOREAD", None, False, "the shoe could not read the card")]


def test_warnings_are_notices_only() -> None:
    codec = BeeTekCodec("SC1")
    decoded = codec.feed(b"<W0x01> [Game]<W0x1F> <w0xab>", NOW)
    assert [(n.kind, n.message) for n in decoded.items if isinstance(n, Notice)] == [
        ("device_warning", "shoe warning W0x01"), ("device_warning", "shoe warning W0x1F"),
        ("corrupt", "unknown element body")]  # lower case is not the shoe's: damaged
    assert [i.kind for i in decoded.items if isinstance(i, ScanInput)] == [ScanKind.CORRUPT]
    assert codec.warnings == 2 and codec.frames_ok == 2 and decoded.heard


def test_noise_between_elements_is_counted_and_changes_nothing() -> None:
    codec = BeeTekCodec("SC1")
    noise = BeeTekShoe.garbage(200, random.Random(3))
    got = inputs(codec, noise, b" [Game]<Card:AS> ", noise, b"\r\n  \t")
    assert got == [("OK", "AS", False, "")]
    blanks = sum(noise.count(c) for c in b" \t\r\n")
    assert codec.garbage_bytes == 2 * (200 - blanks)  # blanks separate elements: not noise


@pytest.mark.parametrize("wire,why", [
    (b" [Game]<Card:1S> ", "not a card"),
    (b" [Game]<Card:4X> ", "not a card"),
    (b" [Game]<Card:4s> ", "not a card"),  # the shoe sends upper case only
    (b" [Game]<Card:11S> ", "not a card"),
    (b" <Card:4S> ", "card read without a [Game] or [Manual Burn Cards] tag"),
    (b" [GameAlarm]<Card:4S> ", "card read without"),
    (b" [Gmae]<Card:4S> ", "unknown tag [Gmae]"),
    (b" <Game> ", "failed read without"),
    (b" <Alarm:E3> ", "alarm without a tag"),
    (b" [Game]<Hello> ", "unknown element body"),
    (b" [Game]<> ", "unknown element body"),
    (b" [Game] <Card:4S> ", "not followed by '<'"),
    (b" [Game]<Card:4S [Game]<Card:5S> ", "torn element"),
    (b" [Game]<Card:\x004S> ", "not printable"),
    (b" [Game]<Card:4S]> ", "unexpected ']'"),
    (b" [Game<Card:4S> ", "tag [Game has no ']'"),
    (b" [Game]<Card:4<W0x01> ", "torn element"),
])
def test_a_damaged_or_meaningless_element_is_one_corrupt_input(wire: bytes, why: str) -> None:
    codec = BeeTekCodec("SC1")
    got = inputs(codec, wire)
    corrupt = [g for g in got if g[0] == "CORRUPT"]
    assert len(corrupt) == 1 and why in corrupt[0][3], got
    assert codec.frames_bad == 1
    # a torn element is reported and the element that broke it in still counts
    if wire.startswith(b" [Game]<Card:4S [Game]"):
        assert got[-1] == ("OK", "5S", False, "")


def test_a_corrupt_notice_carries_the_raw_bytes_for_debug_only() -> None:
    codec = BeeTekCodec("SC1")
    [note] = notices(codec, b" [Game]<Card:ZZ> ")
    assert note.kind == "corrupt" and note.raw == b"[Game]<Card:ZZ>"
    assert "[Game]<Card:ZZ>" not in note.message  # the message never holds the frame itself


# --- bounded memory --------------------------------------------------------------------------


def test_noise_without_delimiters_never_grows_the_buffer() -> None:
    decoder = ElementDecoder()
    for _ in range(64):
        assert decoder.feed(b"x" * 16384) == []
    assert decoder.garbage_bytes == 64 * 16384 and len(decoder._buf) == 0


@pytest.mark.parametrize("opening,limit", [(b"[", MAX_TAG), (b"[Game]<", MAX_BODY)])
def test_an_element_that_never_ends_is_one_overlong_error(opening: bytes, limit: int) -> None:
    decoder = ElementDecoder()
    out = decoder.feed(opening)
    for _ in range(64):
        out += decoder.feed(b"A" * 4096)
        assert len(decoder._buf) <= limit
    [err] = out
    assert isinstance(err, ElementError) and err.reason == "overlong" and len(err.raw) <= MAX_ELEMENT
    assert decoder.feed(b"> [Game]<Card:KD> ") == [Element("Game", "Card:KD")]  # it recovers at the next element


# --- chunking (hypothesis) -------------------------------------------------------------------

ELEMENTS = st.sampled_from([
    b" [Game]<Card:4S> ", b" [Manual Burn Cards]<Card:10D> ", b" [Game]<Game> ", b" [Game]<Alarm:E3 Card Not Read> ",
    b" [GameAlarm]<Alarm:E1 Cover Open> ", b"<W0x01>", b" [Game]<Card:ZZ> ", b"[Game]<Car", b"d:5H>", b"]", b">",
    b"[", b"<", b"\x00\xff", b"\r\n", b" ",
])


def _norm(items: list[object]) -> list[object]:
    return [(type(i).__name__, getattr(i, "kind", None), getattr(i, "code", None), getattr(i, "burn", None),
             getattr(i, "detail", None), getattr(i, "message", None), getattr(i, "raw", None)) for i in items]


def _whole_and_chunked(stream: bytes, cuts: list[int]) -> tuple[BeeTekCodec, list[object], BeeTekCodec, list[object]]:
    whole = BeeTekCodec("SC1")
    a = whole.feed(stream, NOW).items
    chunked = BeeTekCodec("SC1")
    b: list[object] = []
    prev = 0
    for cut in sorted(c % (len(stream) + 1) for c in cuts) + [len(stream)]:
        b += chunked.feed(stream[prev:cut], NOW).items
        prev = cut
    return whole, list(a), chunked, b


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(ELEMENTS, st.binary(max_size=40)), max_size=30), st.lists(st.integers(0, 10_000), max_size=12))
def test_split_or_joined_reads_decode_the_same(pieces: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(pieces)
    whole, a, chunked, b = _whole_and_chunked(stream, cuts)
    assert _norm(a) == _norm(b)
    assert (whole.garbage_bytes, whole.frames_ok, whole.frames_bad) == (chunked.garbage_bytes, chunked.frames_ok,
                                                                      chunked.frames_bad)
    assert len(whole.decoder._buf) <= max(MAX_TAG, MAX_BODY)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_byte_by_byte_never_raise_and_match_the_whole(data: bytes) -> None:
    whole, a, chunked, b = _whole_and_chunked(data, list(range(len(data))))
    assert _norm(a) == _norm(b)
    for item in a:
        assert isinstance(item, (ScanInput, Notice))
        if isinstance(item, ScanInput):
            assert item.kind in (ScanKind.OK, ScanKind.NOREAD, ScanKind.FAULT, ScanKind.CORRUPT)
            assert item.kind is not ScanKind.OK or item.code in CARDS
            assert item.kind is ScanKind.OK or item.detail  # every failure says why


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(sorted(CARDS)), min_size=1, max_size=20, unique=True), st.integers(0, 2**32))
def test_the_virtual_shoe_is_decoded_to_exactly_its_cards(cards: list[str], seed: int) -> None:
    rng = random.Random(seed)
    shoe = BeeTekShoe(ten=rng.choice(("10", "T")))
    stream = b"".join(shoe.card(c) + (shoe.warning(3) if rng.random() < 0.3 else b"")
                      + shoe.garbage(rng.randrange(5), rng) for c in cards)
    codec = BeeTekCodec("SC1")
    got = [i.code for c in shoe.split(stream, rng, 6) for i in codec.feed(c, NOW).items if isinstance(i, ScanInput)]
    assert got == cards


# --- the simulator's faults, decoded ---------------------------------------------------------


@pytest.mark.parametrize("fault", FAULTS)
def test_each_simulated_fault_decodes_as_documented(fault: str) -> None:
    rng = random.Random(7)
    shoe = BeeTekShoe()
    plan = BeeTekFaultPlan(script=[fault])
    cp = plan.pass_card(shoe, "QC", rng)
    codec = BeeTekCodec("SC1")
    got = [(k, c) for k, c, _b, _d in inputs(codec, *cp.chunks)]
    expected = {
        "failed": [("NOREAD", None)], "alarm": [("FAULT", None)], "warning": [("OK", "QC")],
        "garbage": [("OK", "QC")], "split": [("OK", "QC")], "joined": [("OK", "QC")],
        "drop": [],  # the line lost it: nothing at all arrives, nothing can tell (no sequence number)
        "repeat": [("OK", "QC"), ("OK", "QC")],  # a second read to the backend: the table refuses it
    }[fault]
    assert got == expected and cp.registers == (fault not in ("failed", "alarm", "drop"))


def test_the_fault_plan_refuses_unknown_faults_and_bad_probabilities() -> None:
    with pytest.raises(ValueError, match="unknown faults"):
        BeeTekFaultPlan(script=["torn"])
    with pytest.raises(ValueError, match="sum to at most 1"):
        BeeTekFaultPlan(failed=0.8, alarm=0.3)
    with pytest.raises(ValueError, match="not a card a Bee-Tek shoe reads"):
        BeeTekShoe().burn("01G")
    assert BeeTekShoe().card("01G") == BeeTekShoe().failed(), "a card the shoe cannot recognise is a failed read"


def test_interpret_names_why_an_element_means_nothing() -> None:
    assert interpret(Element("Game", "Card:10C")) == (ScanKind.OK, "TC", "")
    assert isinstance(interpret(Element(None, "W0xFF")), Notice)
    assert interpret(Element("Manual Burn Cards", "Alarm:E3")) == (ScanKind.FAULT, None, "shoe alarm: E3")


def test_lone_brackets_are_noise_not_errors() -> None:
    codec = BeeTekCodec("SC1")
    assert inputs(codec, b"[[[[<<< [] <> [ < [\x00 [Game]<Card:AS> ") == [("OK", "AS", False, "")]
    assert codec.frames_bad == 0 and codec.garbage_bytes == 15  # every byte but the blanks


@pytest.mark.slow
def test_the_fuzz_target_for_the_decoder_runs_clean() -> None:
    from tools import fuzz

    result = fuzz.run_fuzz(inputs=1500, seed=3, targets=["beetek_stream"], progress=False)["targets"]["beetek_stream"]
    assert result["findings"] == [] and result["accepted"] > 0 and result["rejected"] > 0


# --- the doc's byte vectors (docs/scanner-protocol.md §10.2) -------------------------------------


def _vectors() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## 10. Vendor protocols"):]
    rows = [line for line in section.splitlines() if line.startswith("| B")]
    return [[c.strip().strip("`") for c in row.strip("|").split("|")] for row in rows]


def _describe(codec: BeeTekCodec, items: list[object]) -> str:
    out = [f"GARBAGE {codec.garbage_bytes}"] if codec.garbage_bytes else []
    for item in items:
        if isinstance(item, Notice) and item.kind == "device_warning":
            out.append("WARNING " + item.message.rsplit(" ", 1)[1])
        elif isinstance(item, ScanInput):
            what = item.code if item.kind is ScanKind.OK else item.detail if item.kind is ScanKind.FAULT else ""
            out.append(" ".join(filter(None, [item.kind.value, what, "burn" if item.burn else ""])))
    return " ; ".join(out)


def test_the_doc_has_its_byte_vectors() -> None:
    assert len(_vectors()) >= 10


@pytest.mark.parametrize("row", _vectors(), ids=[r[0] for r in _vectors()])
def test_doc_byte_vector(row: list[str]) -> None:
    _, wire, expected, _meaning = row
    data = ast.literal_eval(wire)
    whole = BeeTekCodec("SC1")
    assert _describe(whole, whole.feed(data, NOW).items) == expected
    byte_by_byte = BeeTekCodec("SC1")
    items = [i for k in range(len(data)) for i in byte_by_byte.feed(data[k:k + 1], NOW).items]
    assert _describe(byte_by_byte, items) == expected
