"""Fuzzing: every parser of outside bytes refuses garbage with its documented exception and a reason.

Three parts: hypothesis property tests per parser (bytes, text, JSON-shaped and recursive
JSON, TOML-shaped); a short run of the generator fuzzer of :mod:`tools.fuzz` that must
report no finding; and regression tests for what the fuzzer found (each asserts the fixed
behaviour).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tools import fuzz

from dealer.edge import topics
from dealer.edge.config import ConfigError, load_settings
from dealer.core.events import ACTION_ADAPTER, EVENT_ADAPTER, OpenRound
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, StationPrompt
from dealer.edge.service import Service
from dealer.core.table import Table
from drivers.bus import LocalBus
from drivers.frames import (
    FAULT_CODES,
    MAX_FRAME_LEN,
    SEQ_MOD,
    Frame,
    FrameAuthenticator,
    FrameDecoder,
    FrameError,
    ReaderSession,
    Status,
    crc16,
    decode_frame,
    encode_frame,
)
from drivers.scan import ScanKind
from drivers.scanner_json import MqttScannerIngest, ScannerMessage

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TABLE = "T1"

# --- strategies ---------------------------------------------------------------------------------

json_leaf = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(2**70), max_value=2**70)
             | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=30)
             | st.sampled_from(["1e26", "1E+999999999", "NaN", "sNaN", "-0", "10.00", "\u0661\u0662", "1_0", ""]))
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=20)


def shaped(seeds: list[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Documents shaped like a valid seed: each field kept or replaced, sometimes an extra key."""
    def one(seed: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
        fields = {k: st.just(v) | json_value for k, v in seed.items()}
        optional = {k: v for k, v in {"extra": json_value, "type": st.text(max_size=20)}.items() if k not in seed}
        return st.fixed_dictionaries(fields, optional=optional)
    return st.sampled_from(seeds).flatmap(one)


def payloads(seeds: list[dict[str, Any]]) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=200),
        st.text(max_size=100).map(fuzz.encode_text),
        json_value.map(lambda v: json.dumps(v).encode()),
        shaped(seeds).map(lambda d: json.dumps(d).encode()),
        shaped(seeds).map(lambda d: fuzz.encode_text(json.dumps(d, ensure_ascii=False))),
    )


CORPUS = fuzz.corpus()
printable = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20)


@st.composite
def framed(draw: st.DrawFn) -> bytes:
    """Frame-shaped lines with a correct CRC (mostly), so the field checks are reached."""
    fields = draw(st.lists(printable | st.sampled_from(["SC1", "0", "1", "OK", "HB", "BOOT", "FAULT", "JAM", "AS", ""]),
                           min_size=3, max_size=5))
    body = ",".join(fields).encode("ascii")
    crc = f"{crc16(body):04X}".encode() if draw(st.integers(0, 9)) else draw(st.binary(max_size=5))
    return b"$" + body + b"*" + crc + draw(st.sampled_from([b"\r\n", b"\n", b"", b"\r"]))


PAYLOADS = {Status.OK: st.from_regex(r"[0-9A-Z]{2,4}", fullmatch=True), Status.NOREAD: st.just(""),
            Status.MISREAD: st.from_regex(r"[0-9A-Z?]{0,8}", fullmatch=True),
            Status.FAULT: st.sampled_from(sorted(FAULT_CODES)), Status.HB: st.just(""),
            Status.BOOT: st.from_regex(r"[0-9A-Za-z.\-]{0,16}", fullmatch=True)}


@st.composite
def valid_frames(draw: st.DrawFn, reader: st.SearchStrategy[str] | None = None, signed: bool = True,
                 seqs: st.SearchStrategy[int] | None = None) -> Frame:
    status = draw(st.sampled_from(list(Status)))
    seq = 0 if status is Status.BOOT else draw(seqs if seqs is not None else st.integers(0, SEQ_MOD - 1))
    rdr = draw(reader if reader is not None else st.from_regex(r"[A-Z0-9-]{1,16}", fullmatch=True))
    frame = Frame(rdr, seq, status, draw(PAYLOADS[status]))
    if signed and draw(st.booleans()):
        key = draw(st.sampled_from([fuzz.KEY, fuzz.OTHER_KEY]))
        frame = frame.sign(key, draw(st.integers(0, 3) | st.integers(0, SEQ_MOD - 1)))
    return frame


def _check_frame_error(err: FrameError) -> None:
    assert str(err).strip(), "a FrameError without a message"
    assert isinstance(err.reason, str) and err.reason, "a FrameError without a reason category"
    assert isinstance(err.raw, bytes) and len(err.raw) <= MAX_FRAME_LEN


# --- frame codec ----------------------------------------------------------------------------------


@PROPS
@given(st.one_of(st.binary(max_size=120), framed(), st.sampled_from(CORPUS.frame_lines)))
def test_decode_frame_accepts_exactly_or_refuses_with_a_reason(line: bytes):
    try:
        frame = decode_frame(line)
    except FrameError as err:
        _check_frame_error(err)
        return
    body = line[:-2] if line.endswith(b"\r\n") else line[:-1] if line.endswith(b"\n") else line
    assert encode_frame(frame) == body + b"\r\n"


@PROPS
@given(valid_frames())
def test_every_valid_frame_round_trips(frame: Frame):
    assert decode_frame(encode_frame(frame)) == frame


@pytest.mark.slow
@PROPS
@given(st.lists(st.one_of(st.binary(max_size=40), framed(), st.sampled_from(CORPUS.frame_lines)), max_size=8),
       st.lists(st.integers(0, 400), max_size=8))
def test_frame_decoder_never_raises_and_ignores_chunking(pieces: list[bytes], cuts: list[int]):
    stream = b"".join(pieces)
    whole = FrameDecoder()
    out = whole.feed(stream)
    chunked = FrameDecoder()
    out2: list[Any] = []
    prev = 0
    for cut in sorted(min(c, len(stream)) for c in cuts) + [len(stream)]:
        out2 += chunked.feed(stream[prev:cut])
        prev = cut

    def norm(items: list[Any]) -> list[Any]:
        return [x if isinstance(x, Frame) else (str(x), x.reason, x.raw) for x in items]

    assert norm(out) == norm(out2)
    assert whole.garbage_bytes == chunked.garbage_bytes
    for item in out:
        if isinstance(item, FrameError):
            _check_frame_error(item)
        else:
            assert isinstance(item, Frame)


@pytest.mark.slow
@PROPS
@given(st.lists(valid_frames(reader=st.just("SC1"), signed=False), max_size=30))
def test_reader_session_takes_any_frame_sequence(frames: list[Frame]):
    session = ReaderSession("SC1")
    for i, frame in enumerate(frames):
        for inp in session.accept(frame, i):
            assert inp.reader == "SC1"
            assert inp.seq is None or 0 <= inp.seq < SEQ_MOD
            if inp.kind in (ScanKind.CORRUPT, ScanKind.LOST):
                assert inp.detail
    with pytest.raises(ValueError, match="given to the session"):
        session.accept(Frame("SC2", 1, Status.HB), 0)


STATE = ("last_seq", "boot", "last_seen_ns", "last_heartbeat_ns", "lost", "repeats", "restarts", "boots", "firmware")


@pytest.mark.slow
@PROPS
@given(st.lists(valid_frames(reader=st.just("SC1"), seqs=st.integers(0, 6) | st.integers(0, SEQ_MOD - 1)), max_size=30),
       st.booleans())
def test_authenticating_session_forges_alone_with_a_reason_and_changes_nothing(frames: list[Frame], require: bool):
    session = ReaderSession("SC1", FrameAuthenticator([fuzz.KEY], require=require))
    for i, frame in enumerate(frames):
        before = [getattr(session, a) for a in STATE]
        out = session.accept(frame, i + 1)
        genuine = frame.mac is not None and frame.sign(fuzz.KEY, frame.boot) == frame
        if not genuine and (frame.mac is not None or require):
            assert [x.kind for x in out] == [ScanKind.FORGED]
        forged = [x for x in out if x.kind == ScanKind.FORGED]
        if forged:
            assert len(out) == 1 and forged[0].reason and forged[0].detail
            assert [getattr(session, a) for a in STATE] == before


# --- JSON payloads --------------------------------------------------------------------------------


def _refuses_with_reason(parse: Any, payload: bytes) -> Any:
    try:
        return parse(payload)
    except ValidationError as exc:
        assert exc.errors() and all(e["msg"] for e in exc.errors())
        assert str(exc).strip()
        return None


@pytest.mark.slow
@PROPS
@given(payloads(CORPUS.scanner))
def test_scanner_message_refuses_with_a_validation_error(payload: bytes):
    msg = _refuses_with_reason(ScannerMessage.model_validate_json, payload)
    if msg is not None:
        ScannerMessage.model_validate_json(msg.model_dump_json())
        try:
            msg.frame()
        except FrameError as err:
            assert str(err)


@pytest.fixture(scope="module")
def ingest() -> tuple[MqttScannerIngest, dict[str, list[Any]]]:
    seen: dict[str, list[Any]] = {"bad": [], "input": [], "link": []}
    ing = MqttScannerIngest({"SC1": TABLE}, topic_table=topics.scanner_table, on_input=lambda t, i: seen["input"].append(i),
                            on_link=lambda t, s: seen["link"].append(s), on_bad=lambda k, r: seen["bad"].append(r))
    return ing, seen


@pytest.mark.slow
@PROPS
@given(payloads(CORPUS.scanner), st.sampled_from([topics.scanner(TABLE), topics.scanner("T9"), "", "x/tables/T1/scanner"]))
def test_scanner_ingest_reports_every_bad_message_once_with_a_reason(ingest, payload: bytes, topic: str):
    ing, seen = ingest
    for v in seen.values():
        v.clear()
    ing.handle(topic, payload)  # never raises
    try:
        ScannerMessage.model_validate_json(payload).frame()
        valid = True
    except (ValidationError, FrameError):
        valid = False
    if not valid:
        assert len(seen["bad"]) == 1 and seen["bad"][0].strip()
    assert len(seen["bad"]) <= 1
    if seen["bad"]:
        assert not seen["input"]


@pytest.mark.slow
@PROPS
@pytest.mark.parametrize("adapter,seeds", [(ACTION_ADAPTER, CORPUS.actions), (EVENT_ADAPTER, CORPUS.events)],
                         ids=["actions", "events"])
@given(data=st.data())
def test_action_and_event_adapters_refuse_with_a_validation_error(adapter, seeds, data):
    payload = data.draw(payloads(seeds))
    obj = _refuses_with_reason(adapter.validate_json, payload)
    if obj is not None:
        assert adapter.validate_json(adapter.dump_json(obj)) == obj


MODELS = [(RoundResult, "round_result"), (PlayerMessage, "player_message"), (StationPrompt, "station_prompt"),
          (RoundEvent, "round_event")]


@pytest.mark.slow
@PROPS
@pytest.mark.parametrize("model,name", MODELS, ids=[n for _, n in MODELS])
@given(data=st.data())
def test_published_messages_refuse_with_a_validation_error(model, name, data):
    payload = data.draw(payloads(CORPUS.messages[name]))
    msg = _refuses_with_reason(model.model_validate_json, payload)
    if msg is not None:
        model.model_validate_json(msg.model_dump_json())


# --- the service's action handler ---------------------------------------------------------------


@pytest.fixture(scope="module")
def service_target():
    with fuzz.open_target("service_actions", seed=11) as target:
        yield target


@pytest.mark.slow
@PROPS
@given(payloads(CORPUS.actions + [{"type": "place_bet", "bet_id": "b1", "player_id": "p1", "bet_type": "ante",
                                   "stake": "10", "seat": 2, "round_id": "T2-000001", "command_id": "b1"},
                                  {"type": "close_betting", "by": "dealer", "round_id": "T1-000001",
                                   "command_id": "station-9"}]),
       st.sampled_from([topics.actions("T1"), topics.actions("T2"), topics.station("T1"), topics.station("T2"),
                        topics.supervisor("T1"), topics.actions("T9"), topics.station("T9"), "studio/v1/tables"]))
def test_service_action_handler_never_raises_and_malformed_actions_change_nothing(service_target, payload, topic):
    """The fuzz harness's check: _on_command never raises; a command the roles and the schema
    refuse (malformed, another role's, without its ids) changes no table and is refused with a
    reason (a published ``rejected`` event); a valid one is queued unchanged and the core
    handles it without raising."""
    outcome = fuzz.run_one(service_target, (topic, payload))
    assert outcome.result != "finding", outcome


# --- configuration ------------------------------------------------------------------------------

toml_leaf = (st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.floats() | st.text(max_size=20)
             | st.sampled_from(["1e999999999", "0.01", "teen-patti", "sevenluck", "mqtt", "serial", "SC1", "T1"]))
toml_value = st.recursive(toml_leaf, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=12)


@st.composite
def toml_docs(draw: st.DrawFn) -> bytes:
    seed = draw(st.sampled_from(CORPUS.configs))
    doc = json.loads(json.dumps(seed))
    for section in list(doc):
        if isinstance(doc[section], dict) and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(doc[section]) + ["extra"]))
            doc[section][key] = draw(toml_value)
    for table in doc.get("tables", []):
        if draw(st.booleans()):
            key = draw(st.sampled_from(sorted(table) + ["extra"]))
            table[key] = draw(toml_value)
    return fuzz.encode_text(fuzz.dump_toml(doc))


@pytest.fixture(scope="module")
def config_path(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-config") / "dealer.toml"


@pytest.mark.slow
@PROPS
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(fuzz.encode_text), toml_docs()))
def test_load_settings_raises_only_config_error(config_path: Path, text: bytes):
    config_path.write_bytes(text)
    try:
        load_settings(config_path)
    except ConfigError as exc:
        assert str(exc).strip()


# --- the fuzzer itself ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_short_fuzz_run_has_no_findings():
    # no time limit per call (slow_s=inf): a "slow" finding measures this machine's load, not
    # the code; it is `dealer bench fuzz`'s business, and a test never asserts on time
    parsers = [t for t in fuzz.TARGETS if t not in fuzz.GAME_TARGETS]  # the live games: the next test
    result = fuzz.run_fuzz(inputs=20_000, seed=0, targets=parsers, progress=False, slow_s=math.inf)
    assert result["totals"]["inputs"] == 20_000
    for name, r in result["targets"].items():
        assert r["inputs"] == r["accepted"] + r["rejected"]
        assert r["accepted"] > 0 and r["rejected"] > 0, f"{name}: the generator never reaches both outcomes"
    findings = [f for r in result["targets"].values() for f in r["findings"]]
    assert findings == [], json.dumps(findings, indent=1)[:6000]


@pytest.mark.slow
def test_the_peer_games_commands_on_a_live_service_find_nothing():
    """Stud, Seotda and Matgo commands (valid, out of turn, wrong buttons, stale turns, bad
    amounts, reservations at the wrong moment, malformed) through a live service: no finding,
    both outcomes, and rounds that get somewhere (a result, a player's action, a timeout)."""
    result = fuzz.run_fuzz(inputs=660, seed=3, targets=list(fuzz.GAME_TARGETS), progress=False, slow_s=math.inf)
    findings = [f for r in result["targets"].values() for f in r["findings"]]
    assert findings == [], json.dumps(findings, indent=1)[:6000]
    for name, r in result["targets"].items():
        assert r["accepted"] > 0 and r["rejected"] > 0, name
        reached = r["reached"]
        assert reached.get("result:COMPLETED") and any(k.startswith("action:") for k in reached), (name, reached)


def test_the_game_fuzzer_finds_a_refusal_that_changes_the_table(monkeypatch):
    """The live harness is not blind: a core whose refused stud action leaves a mark on the
    round (its reject counter) is reported at once."""
    from dealer.core import round as round_machine

    key = (round_machine.Phase.ACTION, "player_action")
    refuse = round_machine.TRANSITIONS[key]

    def marking(self, ev):  # type: ignore[no-untyped-def]
        out = refuse(self, ev)
        if not out.accepted:
            self.reject_count += 1
        return out

    monkeypatch.setitem(round_machine.TRANSITIONS, key, marking)
    result = fuzz.run_fuzz(inputs=150, seed=3, targets=["stud_commands"], progress=False, slow_s=math.inf)
    keys = [f["where"] for f in result["targets"]["stud_commands"]["findings"]]
    assert "a refused player_action changed the table" in keys, keys


def test_fuzz_results_are_reproducible_from_the_seed():
    def counts(r: dict[str, Any]) -> dict[str, Any]:
        return {n: (t["inputs"], t["accepted"], t["rejected"],
                    [(f["kind"], f["where"], f["count"]) for f in t["findings"]])
                for n, t in r["targets"].items()}

    targets = ["frame_decode", "frame_stream", "scanner_json", "actions"]
    first = fuzz.run_fuzz(inputs=2000, seed=42, targets=targets, progress=False, slow_s=math.inf)
    assert counts(first) == counts(fuzz.run_fuzz(inputs=2000, seed=42, targets=targets, progress=False,
                                                 slow_s=math.inf))
    assert fuzz.generate_input("actions", 42, 7) == fuzz.generate_input("actions", 42, 7)


def test_fuzz_classifies_undocumented_exceptions_as_findings():
    class Broken(fuzz.Target):
        name = "broken"
        allowed = (FrameError,)

        def check(self, inp: Any) -> bool:
            if inp == "type":
                raise TypeError("boom")
            if inp == "silent":
                raise FrameError("")
            raise FrameError("bad frame")

    t = Broken()
    assert fuzz.run_one(t, "type").result == "finding"
    assert fuzz.run_one(t, "silent").kind == "rejection"
    assert fuzz.run_one(t, "ok").result == "rejected"


def test_bench_fuzz_command(capsys):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="bench", required=True)
    fuzz.register(sub)
    args = parser.parse_args(["fuzz", "--inputs", "200", "--seed", "3", "--target", "frame_decode", "--quiet"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seed"] == 3 and list(out["targets"]) == ["frame_decode"] and out["totals"]["inputs"] == 200
    assert set(out["targets"]["frame_decode"]) >= {"inputs", "accepted", "rejected", "findings", "max_ms", "inputs_per_s"}


@pytest.mark.integration  # atheris runs in a child process
def test_atheris_engine_runs_the_same_targets():
    import atheris  # noqa: F401  (a test dependency: scripts/test installs it)
    result = fuzz.run_atheris(inputs=3000, seed=1, targets=["frame_decode"], timeout_s=120)
    r = result["targets"]["frame_decode"]
    assert r["inputs"] >= 3000 and r["findings"] == [] and r["coverage"]


# --- regressions: what the fuzzer found (each asserts the fixed behaviour) ------------------------


def _service(tmp_path: Path, **table: Any) -> Service:
    settings = load_settings(service={"journal_path": tmp_path / "j.sqlite", "metrics_enabled": False},
                             tables=[{"id": TABLE, "game": "teen-patti", "auto_rounds": False,
                                      "scanner": {"kind": "mqtt", "reader_id": "SC1"}, **table}])
    service = Service(settings, bus=LocalBus(), broker_link=False)
    service.commit_loop.replay()  # not started: its tables are put in as a start adopts them
    return service


@pytest.mark.parametrize("payload", [
    b'{"type":"place_bet","player_id":"p1","bet_id":' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"at":0,"type":"close_betting","by":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"type":"place_bet","x":' + b'{"a":' * 3000 + b"1" + b"}" * 3000 + b"}",
], ids=["list-5000", "list-100000", "object-3000"])
async def test_regression_deeply_nested_action_is_refused_with_a_reason(tmp_path: Path, payload: bytes):
    """Fuzz finding: pydantic refuses nesting deeper than its limit, then ``_player_of`` parses
    the same payload with ``json.loads`` to find whom to answer, which raises RecursionError
    out of ``Service._on_action`` (dealer/edge/service.py ``_player_of``: only ValueError and
    AttributeError are caught)."""
    service = _service(tmp_path)
    seen: list[Any] = []
    service.add_observer(lambda kind, msg: seen.append(msg))
    try:
        service.inputs.on_command(topics.actions(TABLE), payload)  # must not raise
        await asyncio.sleep(0)
        assert service.queue.items.empty()
        rejected = [m for m in seen if isinstance(m, RoundEvent) and m.event == "rejected"]
        assert len(rejected) == 1 and rejected[0].data["reason"]
    finally:
        service.writer.shutdown(wait=True)
        service.journal.close()


@pytest.mark.parametrize("topic,payload", [
    (topics.actions(TABLE), b'{"type":"\\ud800"}'),
    (topics.actions(TABLE), b'{"type":"place_bet\xed\xa0\x80","player_id":"p1"}'),
    (topics.station(TABLE), b'{"type":"close_betting","by":"dealer","round_id":"T1-000001","command_id":"\\udfff"}'),
], ids=["escaped-type", "cesu-bytes-type", "escaped-command-id"])
async def test_regression_lone_surrogates_in_a_command_are_refused_with_a_reason(tmp_path: Path, topic: str,
                                                                                  payload: bytes):
    """Fuzz finding (service_actions): ``json.loads`` accepts lone surrogates (``\\ud800``, and
    CESU-8 bytes: it decodes bytes with ``surrogatepass``); the ingress echoes the command's
    ``type`` and ``command_id`` into the refusal, and publishing the ``rejected`` event (or
    logging it) raises UnicodeEncodeError / PydanticSerializationError out of
    ``Service._on_command`` (dealer/edge/ingress.py ``parse``: ``ctype_s``, ``cid``)."""
    service = _service(tmp_path)
    seen: list[Any] = []
    service.add_observer(lambda kind, msg: seen.append(msg))
    try:
        service.inputs.on_command(topic, payload)  # must not raise
        await asyncio.sleep(0)
        assert service.queue.items.empty()
        rejected = [m for m in seen if isinstance(m, RoundEvent) and m.event == "rejected"]
        assert len(rejected) == 1 and rejected[0].data["reason"]
        rejected[0].model_dump_json()  # what goes on the wire
    finally:
        service.writer.shutdown(wait=True)
        service.journal.close()


@pytest.mark.parametrize("stake", ['"1e26"', '"1000e26"', '"1E+999999999"', "1000000000000000000000000000000",
                                   '"99999999999999999999999999999"'])
def test_regression_stake_beyond_decimal_precision_is_refused_with_a_reason(stake: str):
    """Fuzz finding: a stake whose count of minor units has more than 28 digits passes the schema
    (``to_money`` only refuses floats and non-finite values), then ``check_stake`` computes
    ``stake % minor_unit`` and decimal raises InvalidOperation (DivisionImpossible) out of
    ``Table.handle`` (dealer/core/money.py ``check_stake``); the service turns it into an
    "internal error: [<class 'decimal.DivisionImpossible'>]" rejection."""
    payload = ('{"type":"place_bet","bet_id":"b1","player_id":"p1","bet_type":"player_a","stake":' + stake + "}").encode()
    try:
        action = ACTION_ADAPTER.validate_json(payload)
    except ValidationError as exc:
        assert "stake" in str(exc)
        return
    settings = load_settings(service={"metrics_enabled": False},
                             tables=[{"id": TABLE, "game": "teen-patti", "scanner": {"kind": "mqtt", "reader_id": "SC1"}}])
    table = Table(settings.tables[0].rules())
    assert table.handle(OpenRound(round_id=f"{TABLE}-000001")).accepted
    step = table.handle(action)  # must not raise
    assert not step.accepted and step.rejection is not None and "stake" in step.rejection.reason


def _toml_table(extra: str) -> str:
    return (f'[[tables]]\nid = "T1"\ngame = "teen-patti"\n{extra}\n'
            '[tables.scanner]\nkind = "mqtt"\nreader_id = "SC1"\n')


@pytest.mark.parametrize("text", [
    "a = " + "[" * 100_000 + "]" * 100_000,
    "a = " + "{b=" * 10_000 + "1" + "}" * 10_000,
    _toml_table("options = {tie_ratio = " + "[" * 5000 + "]" * 5000 + "}"),
], ids=["array", "inline-table", "inside-a-table"])
def test_regression_deeply_nested_toml_is_a_config_error(tmp_path: Path, text: str):
    """Fuzz finding: tomllib parses nested arrays and inline tables recursively and raises
    RecursionError, which ``load_settings`` does not turn into ConfigError (it catches
    ValidationError, ValueError and OSError only)."""
    path = tmp_path / "dealer.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert str(info.value).strip()


@pytest.mark.parametrize("extra", [
    '[tables.limits.tie]\nmin = "1e999999999"\nmax = "1e999999999"',
    '[tables.limits.player_a]\nmin = "1e30"\nmax = "1e30"',
    'minor_unit = "1e-999999999"\n[tables.limits.tie]\nmin = "1"\nmax = "5"',
], ids=["huge-limits", "limits-1e30", "tiny-minor-unit"])
def test_regression_limits_beyond_decimal_precision_are_a_config_error(tmp_path: Path, extra: str):
    """Fuzz finding: ``TableConfig._limits`` computes ``amount % minor_unit``; with more than 28
    digits in the quotient decimal raises InvalidOperation (an ArithmeticError, not a
    ValueError), which escapes pydantic and ``load_settings`` (dealer/edge/config.py ``_limits``)."""
    path = tmp_path / "dealer.toml"
    path.write_text(_toml_table(extra))
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert "limits" in str(info.value) or "minor_unit" in str(info.value)


@pytest.mark.parametrize("extra,key", [
    ("decision_seconds = inf", "decision_seconds"),
    ("decision_seconds = 1e309", "decision_seconds"),
    ("betting_seconds = inf", "betting_seconds"),
], ids=["decision-inf", "decision-1e309", "betting-inf"])
def test_regression_infinite_timers_are_a_config_error(tmp_path: Path, extra: str, key: str):
    """Fuzz finding: ``gt=0`` lets ``inf`` through. ``decision_seconds = inf`` makes
    ``TableConfig.rules()`` (called by ``Service.__init__``) raise OverflowError on
    ``int(decision_seconds * 1000)``; ``betting_seconds = inf`` makes ``Service.open_round``
    raise OverflowError on ``int(betting_seconds * 1000)`` every time a round would open."""
    path = tmp_path / "dealer.toml"
    path.write_text(_toml_table(extra))
    with pytest.raises(ConfigError) as info:
        settings = load_settings(path)
        settings.tables[0].rules()  # what the service does first with a table
    assert key in str(info.value)


# --- regressions of the peer games' commands (tools/fuzz_games.py) -------------------------------


def _matgo_at_the_players_play(tmp_path: Path) -> tuple[Table, list[str], list[str], list[str]]:
    """A Matgo round at the player's first PLAY: (table, the player's hand, the AI's hand, the layout)."""
    from dealer.core.events import CloseBetting, PlaceBet, ScanRead
    from dealer.core.cards import HWATU_48

    settings = load_settings(service={"journal_path": tmp_path / "j.sqlite", "metrics_enabled": False},
                             tables=[{"id": "MG1", "game": "matgo", "auto_rounds": False,
                                      "options": {"first_player": "PLAYER"},
                                      "scanner": {"kind": "mqtt", "reader_id": "SC1"}}])
    table = Table(settings.tables[0].rules())
    table.handle(OpenRound(round_id="MG1-000001", at=1))
    table.handle(PlaceBet(bet_id="b", player_id="alice", bet_type="cover", stake="100.00", seat=1, at=2))
    table.handle(CloseBetting(at=3))
    rnd = table.current
    deck = sorted(HWATU_48)
    random.Random(5).shuffle(deck)  # a deal without a redeal, the player first
    while rnd.phase != "ACTION":
        assert table.handle(ScanRead(reader="SC1", code=deck.pop(), at=5)).accepted
    engine, letter = rnd.hand.engine, rnd.hand.letter
    layout = [c for c in rnd.cards.values() if c not in engine.hand(letter["alice"]) + engine.hand(letter["house-ai"])]
    return table, list(engine.hand(letter["alice"])), list(engine.hand(letter["house-ai"])), layout


def test_regression_a_refused_matgo_move_does_not_tell_which_cards_the_house_ai_holds(tmp_path: Path):
    """Fuzz finding (matgo_commands): a PLAY naming a card not in the player's hand was refused
    with "a hidden card is not in F's hand" when the card was in the house AI's hand, and with
    "07R is not in F's hand" when it was not (on the layout, or still in the stock): 38 refused
    commands told the player the AI's whole hand. The answer to a card the player named is now
    the same whoever holds it (dealer/core/table.py, ``visibility.unnamed``)."""
    from dealer.core.events import PlayerAction

    table, mine, ai, layout = _matgo_at_the_players_play(tmp_path)
    stock = sorted(set(table.rules.game.deck) - set(table.current.cards.values()))
    reasons = set()
    for card in (ai[0], ai[-1], layout[0], stock[0]):
        step = table.handle(PlayerAction(player_id="alice", action="PLAY", card=card, round_id="MG1-000001",
                                         turn=table.current.turn, at=6))
        assert not step.accepted
        reasons.add(step.rejection.reason)
    assert reasons == {"the card named is not in F's hand"}
    step = table.handle(PlayerAction(player_id="alice", action="PLAY", card=mine[0], round_id=f"MG1-{ai[0]}",
                                     turn=table.current.turn, at=7))  # an id naming a card: the same words
    assert not step.accepted and step.rejection.reason == \
        "action is for round MG1-the card named, but round MG1-000001 is in play"


def test_regression_an_answer_naming_an_id_that_spells_a_hidden_card_is_not_withheld(tmp_path: Path):
    """Fuzz finding (stud_commands, matgo_commands): a refusal of a command whose command id
    (``x.JH``), player id or bet id spelled a hidden card was withheld by the publisher ("message
    withheld: it would show hidden cards", logged as an error): the sender got no answer, and
    whether it got one told whether that card was hidden. An id field names a sender's id,
    never a card (dealer/core/visibility.py ``leaks``)."""
    from dealer.core import visibility
    from dealer.core.messages import PlayerMessage, RoundEvent

    table, _mine, ai, _layout = _matgo_at_the_players_play(tmp_path)
    rnd, card = table.current, ai[0]
    public = RoundEvent(table_id="MG1", event="rejected", at=8,
                        data={"type": "player_action", "reason": "no", "command_id": f"x.{card}"})
    assert visibility.leaks(rnd, visibility.PUBLIC, public) == []
    private = PlayerMessage(table_id="MG1", round_id=rnd.round_id, player_id=card, kind="rejected", at=8,
                            data={"type": "place_bet", "reason": "no", "bet_id": card, "command_id": "c1"})
    assert visibility.leaks(rnd, visibility.player(card), private) == []
    shown = PlayerMessage(table_id="MG1", round_id=rnd.round_id, player_id="bob", kind="rejected", at=8,
                          data={"type": "player_action", "reason": "no", "card": card})
    assert visibility.leaks(rnd, visibility.player("bob"), shown) == [card]  # a card field is still a card


async def test_regression_a_player_id_that_spells_a_card_is_refused(tmp_path: Path):
    """Fuzz finding (stud_commands): a player whose id spells a card of the game (``AS``) sat
    down; every message naming that player in words ("waiting for AS") then read as the card:
    withheld, or redacted to "waiting for a hidden card" only while that card was hidden. Such
    an id is refused at the edge, as a dealer's is (dealer/edge/inputs.py)."""
    service = _service(tmp_path)
    seen: list[Any] = []
    service.add_observer(lambda kind, msg: seen.append(msg))
    try:
        for player, refused in (("AS", True), ("TH", True), ("ASX", False), ("10H", False)):
            del seen[:]
            payload = json.dumps({"type": "place_bet", "bet_id": "b1", "player_id": player, "bet_type": "player_a",
                                  "stake": "10", "round_id": f"{TABLE}-000001", "command_id": f"c-{player}"})
            service.inputs.on_command(topics.actions(TABLE), payload.encode())
            await asyncio.sleep(0)
            rejected = [m for m in seen if isinstance(m, RoundEvent) and m.event == "rejected"]
            assert service.queue.items.empty() is refused and len(rejected) == int(refused), (player, rejected)
            if refused:
                assert "spells a card" in rejected[0].data["reason"] and player not in rejected[0].data["reason"]
            while not service.queue.items.empty():
                service.queue.items.get_nowait()
    finally:
        service.writer.shutdown(wait=True)
        service.journal.close()


async def test_regression_a_refusal_at_the_edge_writes_every_card_the_sender_named_alike(tmp_path: Path):
    """Fuzz finding (all three games): a refusal at the edge echoes what the sender wrote (an
    unknown command type ``02A``, a command id ``x.JH`` used before) and was redacted to "a
    hidden card" only while that card was hidden (or withheld): sent while a round is dealt, it
    told which cards are hidden. Every card code in an edge refusal is now "the card named"
    (dealer/edge/inputs.py ``refused``, ``visibility.unnamed_all``)."""
    service = _service(tmp_path)
    seen: list[Any] = []
    service.add_observer(lambda kind, msg: seen.append(msg))
    try:
        service.inputs.on_command(topics.station(TABLE), b'{"type":"AS","command_id":"c1","round_id":"T1-000001"}')
        await asyncio.sleep(0)
        rejected = [m for m in seen if isinstance(m, RoundEvent) and m.event == "rejected"]
        assert len(rejected) == 1 and rejected[0].data["reason"] == \
            "malformed action: unknown command type 'the card named'"
    finally:
        service.writer.shutdown(wait=True)
        service.journal.close()


@pytest.mark.parametrize("text", ["[" + ".".join(["a"] * 2000) + "]\n", "x." * 2000 + "y = 1\n",
                                  "[service]\nnode_id = \"n1\"\n" + "t = {" + "a." * 2000 + "b = 1}\n"],
                         ids=["table-header", "dotted-key", "inline-table"])
def test_regression_a_key_nested_thousands_deep_is_refused_before_it_is_parsed(tmp_path: Path, text: str):
    """Fuzz finding (config, 1,000,000-input run): a table header of 20,000 dotted parts took
    1.3 to 1.9 s to refuse (``tomllib`` takes time in the square of a dotted key's parts: a
    20,000-part key ``x.x.….y = 1`` takes 8 s). A line with more dots outside its strings than
    any setting has is refused before the parse, naming the line."""
    path = tmp_path / "dealer.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"line \d+ nests a key .* deep"):
        load_settings(path)


def test_dots_inside_strings_and_numbers_are_not_nesting(tmp_path: Path):
    path = tmp_path / "dealer.toml"
    path.write_text('[service]\njournal_path = "' + "a." * 100 + 'sqlite"  # ' + "." * 900 + "\n"
                    "metrics_port = 9100 # and 'quoted...' text\n")
    assert str(load_settings(path).service.journal_path).endswith("a.sqlite")


@pytest.mark.parametrize("depth", [33, 1_040])
def test_regression_a_command_nested_deeper_than_any_command_is_refused_before_it_is_parsed(depth: int):
    """Fuzz finding (stud_commands, seotda_commands, 1,000,000-input run): a player action whose
    ``round_id`` nested 1,040 arrays was answered by no ``rejected`` event carrying its id:
    ``json.loads`` met Python's recursion limit in the service (deep in its call stack) and not
    in the sender's view, so whether it parsed depended on the stack. Deeper than any command
    nests is refused before the parse, the same everywhere, with one clear reason."""
    from dealer.edge import ingress
    from dealer.edge.signing import SupervisorVerifier

    body = ('{"type":"player_action","player_id":"p2","action":"RAISE","amount":"20","command_id":"c1",'
            '"round_id":' + "[" * depth + "]" * depth + ',"turn":1}').encode()
    out = ingress.parse("studio/v1/tables/T1/actions", body, tables={"T1"}, now_ms=1, supervisors=SupervisorVerifier({}, max_age_ms=1, max_skew_ms=1))
    assert isinstance(out, ingress.Refused) and out.kind == "malformed"
    assert out.reason == f"malformed action: JSON nested deeper than {ingress.MAX_COMMAND_DEPTH} levels"
    # brackets inside strings are text, not nesting; a normal command is not scanned at all
    text = ('{"type":"player_action","player_id":"p2","action":"FOLD","command_id":"c2","round_id":"'
            + "[" * 40 + '","turn":1}').encode()
    assert not ingress.too_deep(text) and ingress.too_deep(b"[" * 33 + b"]" * 33)
