"""Signed supervisor commands: the canonical form, signing and every refusal of the
verifier, key rotation, the doc's worked example (recomputed from docs/mqtt-topics.md
§10, so doc and code cannot drift), key files, the ``[security]`` configuration, the
pre-flight check, and ``dealer supervisor void|keygen`` run as a real process against a
real Mosquitto (plain, and TLS with a password and an ACL)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import io
import json
import re
import socket
import subprocess
import time
import tomllib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.edge import keys, signing
from dealer.edge.config import ConfigError, load_settings
from dealer.edge.keys import read_hex_key, supervisor_verifier
from dealer.edge.security import check_deployment
from dealer.edge.signing import (
    REFUSAL_KINDS,
    Refused,
    SupervisorVerifier,
    Verified,
    canonical_bytes,
    content_digest,
    sign,
    sign_command,
)
from drivers.frames import MIN_KEY_LEN
from drivers.mqtt import make_tls_context
from simulators.secure_broker import SecureMosquitto, make_test_ca
from tests.conftest import Broker, wait_until
from tests.harness import K1, K2
from tests.harness_cli import supervisor_cli, with_checkout
from tests.harness_docs import DOC_KEYS, SECTION, doc_block, doc_rows

ROOT = Path(__file__).resolve().parent.parent

K_BEN = bytes(range(64, 96))
NOW = 1767261690000
MAX_AGE, MAX_SKEW = 30_000, 5_000


def command(**changes: Any) -> dict[str, Any]:
    base = {"type": "supervisor_void", "command_id": "c-1", "supervisor": "sup-ana", "table_id": "TP1",
            "round_id": "TP1-000044", "issued_at": NOW, "reason": "shoe jammed"}
    return {**base, **changes}


def verifier(**overrides: Any) -> SupervisorVerifier:
    sups: dict[str, Any] = {"sup-ana": ([K1, K2], None), "sup-ben": ([K_BEN], ["TP2"])}
    return SupervisorVerifier(overrides.pop("supervisors", sups), max_age_ms=overrides.pop("max_age_ms", MAX_AGE),
                              max_skew_ms=overrides.pop("max_skew_ms", MAX_SKEW))


# --- the doc's worked example (docs/mqtt-topics.md §10) ---------------------------------------


DOC_SIGNATURES = dict(doc_rows("| Key | `signature` |"))
DOC_COMMAND = json.loads(doc_block("The command, without its signature", "json"))
DOC_CANONICAL = doc_block("Its canonical bytes", "text").rstrip("\n")
DOC_MESSAGE = doc_block("### 10.1 The message", "json").rstrip("\n")


def test_doc_example_is_what_the_code_computes() -> None:
    assert DOC_KEYS == {"TK1": K1, "TK2": K2}
    assert canonical_bytes(DOC_COMMAND).decode("utf-8") == DOC_CANONICAL
    assert f"({len(DOC_CANONICAL.encode())} bytes in UTF-8" in SECTION
    assert DOC_SIGNATURES == {name: sign(key, DOC_COMMAND) for name, key in DOC_KEYS.items()}
    digest = re.search(r"Content digest .*?`([0-9a-f]{64})`", SECTION, re.S)
    assert digest and digest.group(1) == content_digest(DOC_COMMAND)
    # §10.1's message is the command signed with TK1, byte for byte as the signing tool writes it.
    signed = sign_command(K1, DOC_COMMAND)
    assert json.dumps(signed, ensure_ascii=False, separators=(",", ":")) == DOC_MESSAGE
    got = verifier().verify(json.loads(DOC_MESSAGE), "TP1", DOC_COMMAND["issued_at"])
    assert isinstance(got, Verified) and got.key_index == 0 and got.supervisor == "sup-ana"
    assert got.digest == content_digest(DOC_COMMAND)
    tk2 = {**DOC_COMMAND, "signature": DOC_SIGNATURES["TK2"]}
    got2 = verifier().verify(tk2, "TP1", DOC_COMMAND["issued_at"])
    assert isinstance(got2, Verified) and got2.key_index == 1 and got2.digest == got.digest


def test_doc_python_snippet_prints_the_signature() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(doc_block("In Python", "python"), {})  # noqa: S102 - our own doc
    assert out.getvalue().strip() == DOC_SIGNATURES["TK1"]


@pytest.mark.integration
def test_doc_openssl_command_prints_the_signature() -> None:
    proc = subprocess.run(["bash", "-c", doc_block("With OpenSSL", "sh")], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-1] == DOC_SIGNATURES["TK1"]


def test_doc_refusal_kinds_and_config_example() -> None:
    assert [row[0] for row in doc_rows("| `kind` | Refused when |")] == list(REFUSAL_KINDS)
    fields = [row[0] for row in doc_rows("| Field | Type | Rule |")]
    assert sorted(fields) == sorted(signing.SupervisorVoidCommand.model_fields)
    data = tomllib.loads(doc_block("### 10.5 Keys and rotation", "toml"))
    security = load_settings(**data).security
    assert [s.id for s in security.supervisors] == ["sup-ana"]
    assert (security.max_age_ms, security.max_skew_ms) == (MAX_AGE, MAX_SKEW)


# --- the canonical form ----------------------------------------------------------------------


def test_canonical_form() -> None:
    c = command(reason='a "quoted" \\ reason — ünïcode ♠')
    assert canonical_bytes(c) == (
        '{"command_id":"c-1","issued_at":1767261690000,"reason":"a \\"quoted\\" \\\\ reason — ünïcode ♠",'
        '"round_id":"TP1-000044","supervisor":"sup-ana","table_id":"TP1","type":"supervisor_void"}').encode()
    # the key order on the wire does not matter, the signature is not covered
    assert canonical_bytes(dict(reversed(list(c.items())))) == canonical_bytes(c)
    assert canonical_bytes({**c, "signature": "ab" * 32}) == canonical_bytes(c)
    # nested objects sorted too; booleans and null as JSON writes them; control chars as lowercase \u
    assert canonical_bytes({"b": {"z": 1, "a": None}, "a": True, "c": "\x1f\n"}) == \
        b'{"a":true,"b":{"a":null,"z":1},"c":"\\u001f\\n"}'
    assert canonical_bytes({"n": -(2**53 - 1)}) == b'{"n":-9007199254740991}'


@pytest.mark.parametrize("bad, why", [
    ({"issued_at": 1.5}, "no canonical form"), ({"issued_at": 2**53}, "2**53"), ({"x": [1]}, "list"),
    ({"x": {1: "a"}}, "keys must be strings"), ({"reason": "\ud800"}, "lone surrogate"),
    ({"x": float("nan")}, "no canonical form"),
])
def test_values_without_a_canonical_form_are_refused(bad: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        canonical_bytes(command(**bad))
    with pytest.raises(ValueError):
        sign(K1, command(**bad))


def test_sign_and_digest() -> None:
    sig = sign(K1, command())
    assert re.fullmatch(r"[0-9a-f]{64}", sig) and sig != sign(K2, command())
    signed = sign_command(K1, command())
    assert list(signed)[-1] == "signature" and signed["signature"] == sig
    assert sign_command(K1, signed) == signed  # re-signing replaces, never signs the old signature
    assert content_digest(signed) == content_digest(command()) == content_digest(sign_command(K2, command()))
    assert content_digest(command(reason="other")) != content_digest(command())
    with pytest.raises(ValueError, match="15-byte key is too short"):
        sign(b"k" * 15, command())
    assert signing.MIN_KEY_LEN == MIN_KEY_LEN  # the same floor as scanner keys


# --- verification ------------------------------------------------------------------------------


def test_round_trip_and_what_verified_carries() -> None:
    v = verifier()
    got = v.verify(sign_command(K1, command()), "TP1", NOW)
    assert got == Verified(supervisor="sup-ana", command_id="c-1", table_id="TP1", round_id="TP1-000044",
                           issued_at=NOW, command={"type": "supervisor_void", "reason": "shoe jammed"},
                           key_index=0, digest=content_digest(command()), envelope=got.envelope)  # type: ignore[union-attr]
    assert isinstance(got.envelope, signing.SupervisorVoidCommand)  # type: ignore[union-attr]
    assert v.verified == {"sup-ana": [1, 0], "sup-ben": [0]}
    # a supervisor limited to some tables verifies there
    ben = v.verify(sign_command(K_BEN, command(supervisor="sup-ben", table_id="TP2")), "TP2", NOW)
    assert isinstance(ben, Verified) and ben.supervisor == "sup-ben"


def test_rotation_old_and_new_keys_both_verify_and_are_counted() -> None:
    v = verifier()
    for i in range(3):
        assert v.verify(sign_command(K1, command(command_id=f"old-{i}")), "TP1", NOW).key_index == 0  # type: ignore[union-attr]
    assert v.verify(sign_command(K2, command(command_id="new-1")), "TP1", NOW).key_index == 1  # type: ignore[union-attr]
    assert v.verified["sup-ana"] == [3, 1]
    # a refused command is not counted, even when its signature was genuine
    assert isinstance(v.verify(sign_command(K1, command()), "TP1", NOW + MAX_AGE + 1), Refused)
    assert v.verified["sup-ana"] == [3, 1]
    # once the old key is removed, what it signs no longer verifies
    new_only = verifier(supervisors={"sup-ana": ([K2], None)})
    assert new_only.verify(sign_command(K1, command()), "TP1", NOW).kind == "bad_signature"  # type: ignore[union-attr]
    assert isinstance(new_only.verify(sign_command(K2, command()), "TP1", NOW), Verified)


GOOD = sign_command(K1, command())

REFUSALS: list[tuple[str, Any, str, str]] = [  # (id, object, topic table, expected kind)
    ("not-an-object", ["supervisor_void"], "TP1", "malformed"),
    ("a-string", "void", "TP1", "malformed"),
    ("null", None, "TP1", "malformed"),
    ("no-type", {k: v for k, v in GOOD.items() if k != "type"}, "TP1", "malformed"),
    ("unknown-type", {**GOOD, "type": "supervisor_open"}, "TP1", "malformed"),
    ("station-command-type", {**GOOD, "type": "close_betting"}, "TP1", "malformed"),
    ("missing-round", {k: v for k, v in GOOD.items() if k != "round_id"}, "TP1", "malformed"),
    ("missing-issued-at", {k: v for k, v in GOOD.items() if k != "issued_at"}, "TP1", "malformed"),
    ("extra-field", {**GOOD, "at": NOW}, "TP1", "malformed"),
    ("float-issued-at", {**GOOD, "issued_at": float(NOW)}, "TP1", "malformed"),
    ("string-issued-at", {**GOOD, "issued_at": str(NOW)}, "TP1", "malformed"),
    ("bool-issued-at", {**GOOD, "issued_at": True}, "TP1", "malformed"),
    ("negative-issued-at", {**GOOD, "issued_at": -1}, "TP1", "malformed"),
    ("bad-round-id", {**GOOD, "round_id": "TP1 000044"}, "TP1", "malformed"),
    ("bad-supervisor-id", {**GOOD, "supervisor": "sup/ana"}, "TP1", "malformed"),
    ("bad-table-id", {**GOOD, "table_id": "TP-1"}, "TP1", "malformed"),
    ("empty-reason", {**GOOD, "reason": ""}, "TP1", "malformed"),
    ("blank-reason", {**GOOD, "reason": "   "}, "TP1", "malformed"),
    ("long-reason", {**GOOD, "reason": "x" * 201}, "TP1", "malformed"),
    ("control-char-reason", {**GOOD, "reason": "shoe\njammed"}, "TP1", "malformed"),
    ("uppercase-signature", {**GOOD, "signature": GOOD["signature"].upper()}, "TP1", "malformed"),
    ("short-signature", {**GOOD, "signature": GOOD["signature"][:-1]}, "TP1", "malformed"),
    ("number-signature", {**GOOD, "signature": 12}, "TP1", "malformed"),
    ("no-signature", command(), "TP1", "missing_signature"),
    ("null-signature", {**command(), "signature": None}, "TP1", "missing_signature"),
    ("unsigned-and-malformed", command(round_id=""), "TP1", "malformed"),
    ("unknown-supervisor", sign_command(K1, command(supervisor="sup-eve")), "TP1", "unknown_supervisor"),
    ("wrong-key", sign_command(K_BEN, command()), "TP1", "bad_signature"),
    ("altered-reason", {**GOOD, "reason": "a different reason"}, "TP1", "bad_signature"),
    ("altered-round", {**GOOD, "round_id": "TP1-000045"}, "TP1", "bad_signature"),
    ("altered-time", {**GOOD, "issued_at": NOW + 1}, "TP1", "bad_signature"),
    ("claims-another-supervisor", {**GOOD, "supervisor": "sup-ben"}, "TP1", "bad_signature"),
    ("zero-signature", {**GOOD, "signature": "0" * 64}, "TP1", "bad_signature"),
    ("forged-for-wrong-table", {**GOOD, "table_id": "TP2"}, "TP2", "bad_signature"),
    ("wrong-table", GOOD, "TP2", "wrong_table"),
    ("not-allowed-table", sign_command(K_BEN, command(supervisor="sup-ben")), "TP1", "not_allowed_table"),
]


@pytest.mark.parametrize("obj, table, kind", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_every_refusal(obj: Any, table: str, kind: str) -> None:
    v = verifier()
    before = copy.deepcopy(obj)
    got = v.verify(obj, table, NOW)
    assert isinstance(got, Refused) and got.kind == kind, got
    assert got.kind in REFUSAL_KINDS and got.reason and "\n" not in got.reason
    assert obj == before  # the verifier changes nothing it is given
    assert v.verified == {"sup-ana": [0, 0], "sup-ben": [0]}
    for secret in (K1.hex(), K2.hex(), K_BEN.hex(), GOOD["signature"], GOOD["signature"].upper()):
        assert secret not in got.reason
    assert got.authenticated == (kind in ("wrong_table", "not_allowed_table", "stale", "future"))


def test_refusals_name_the_claims_and_say_why() -> None:
    v = verifier()
    forged = v.verify({**GOOD, "reason": "x"}, "TP1", NOW)
    assert forged == Refused("bad_signature", forged.reason, "sup-ana", "c-1", False)  # type: ignore[union-attr]
    assert "sup-ana" in forged.reason and "2 keys" in forged.reason  # type: ignore[union-attr]
    assert "sup-eve is not configured" in v.verify(sign_command(K1, command(supervisor="sup-eve")), "TP1", NOW).reason  # type: ignore[union-attr]
    assert "TP1 received on table TP2" in v.verify(GOOD, "TP2", NOW).reason  # type: ignore[union-attr]
    assert "allowed: TP2" in v.verify(sign_command(K_BEN, command(supervisor="sup-ben")), "TP1", NOW).reason  # type: ignore[union-attr]
    extra = v.verify({**GOOD, "x" * 500: 1}, "TP1", NOW)
    assert extra.kind == "malformed" and "x" * 33 not in extra.reason and "unknown field" in extra.reason  # type: ignore[union-attr]
    weird = v.verify({**GOOD, "supervisor": "a" * 100, "command_id": 7}, "TP1", NOW)
    assert (weird.supervisor, weird.command_id) == (None, None)  # type: ignore[union-attr]
    assert "reason: String should have at most 200 characters" in v.verify(
        {**GOOD, "reason": "é" * 201}, "TP1", NOW).reason  # type: ignore[union-attr]
    assert "type 'nope' is not a supervisor command (known: supervisor_void, supervisor_open_round, " in v.verify(
        {**GOOD, "type": "nope"}, "TP1", NOW).reason  # type: ignore[union-attr]


def test_payloads_are_decoded_strictly() -> None:
    v = verifier()
    wire = json.dumps(GOOD, ensure_ascii=False).encode()
    assert isinstance(v.verify_payload(wire, "TP1", NOW), Verified)
    assert isinstance(v.verify_payload(json.dumps(GOOD).encode(), "TP1", NOW), Verified)  # \u escapes are fine
    reasons = {
        b"": "not JSON", b"\xff" + wire: "not UTF-8", b"[" * 100_000: "more than the 4096",
        wire[:-1] + b',"reason":"other"}': "the key 'reason' appears twice",
        wire[:-1] + b',"\xc3\xa9":1,"\xc3\xa9":2}': "a key appears twice",
        wire.replace(str(NOW).encode(), b"NaN"): "NaN is not a JSON number",
        b"[" * 2000 + b"]" * 2000: "nested too deeply",
        b'"text"': "a supervisor command is a JSON object",
    }
    for payload, why in reasons.items():
        got = v.verify_payload(payload, "TP1", NOW)
        assert isinstance(got, Refused) and got.kind == "malformed" and why in got.reason, (payload[:40], got)
    assert signing.decode_payload(b"[1]") == [1]
    assert v.verified == {"sup-ana": [2, 0], "sup-ben": [0]}


def test_age_and_skew_limits_are_inclusive() -> None:
    v = verifier()
    assert isinstance(v.verify(GOOD, "TP1", NOW + MAX_AGE), Verified)
    stale = v.verify(GOOD, "TP1", NOW + MAX_AGE + 1)
    assert stale.kind == "stale" and f"{MAX_AGE + 1} ms" in stale.reason  # type: ignore[union-attr]
    assert isinstance(v.verify(GOOD, "TP1", NOW - MAX_SKEW), Verified)
    future = v.verify(GOOD, "TP1", NOW - MAX_SKEW - 1)
    assert future.kind == "future" and "clock" in future.reason  # type: ignore[union-attr]
    strict = verifier(max_age_ms=1, max_skew_ms=0)
    assert isinstance(strict.verify(GOOD, "TP1", NOW), Verified)
    assert strict.verify(GOOD, "TP1", NOW - 1).kind == "future"  # type: ignore[union-attr]
    assert strict.verify(GOOD, "TP1", NOW + 2).kind == "stale"  # type: ignore[union-attr]


def test_a_stale_or_future_refusal_says_how_far_apart_the_clocks_are_and_which_one_to_fix() -> None:
    """A wall-clock step (issue 29): still refused (replay protection), but the reason says by how
    much the clocks differ and which to fix, from how far the backend's own clock stepped since
    it started (``clock_step_ms``, the backend's wall clock against its monotonic one)."""
    v = verifier()
    hour = 3_600_000
    # the backend's clock stepped an hour forward: its step explains it, fix the backend
    got = v.verify(GOOD, "TP1", NOW + hour, clock_step_ms=hour + 40)
    assert isinstance(got, Refused) and got.kind == "stale" and got.skew_ms == -hour and got.authenticated
    assert got.reason.endswith("the clocks differ by 3600 s: this backend's clock stepped 3600 s forward since it "
                               "started: fix this backend host's clock (NTP/chrony), not the console's"), got.reason
    got = v.verify(GOOD, "TP1", NOW - hour, clock_step_ms=-hour)
    assert got.kind == "future" and "stepped 3600 s back" in got.reason  # type: ignore[union-attr]
    # the backend's clock did not step: the console's is off (behind: stale; ahead: future)
    got = v.verify(GOOD, "TP1", NOW + 125_000, clock_step_ms=3)
    assert got.kind == "stale" and got.skew_ms == -125_000  # type: ignore[union-attr]
    assert ("the clocks differ by 125 s: the signing console's clock is behind this backend's, which has not stepped "
            "since it started: fix the console's clock") in got.reason  # type: ignore[union-attr]
    got = v.verify(GOOD, "TP1", NOW - 7_500)
    assert got.kind == "future" and "the signing console's clock is ahead of this backend's: fix the console's" in \
        got.reason  # type: ignore[union-attr]
    # a step that does not explain it (the console is off by more): the console's still
    got = v.verify(GOOD, "TP1", NOW + hour, clock_step_ms=60_000)
    assert "fix the console's clock" in got.reason  # type: ignore[union-attr]
    # short enough for the station's ALERT (a security event's detail keeps 300 characters)
    assert len(v.verify(sign_command(K1, command(issued_at=1_000)), "TP1", NOW, clock_step_ms=0).reason) < 300  # type: ignore[union-attr]
    # a fresh command is untouched by any step
    assert isinstance(v.verify(GOOD, "TP1", NOW, clock_step_ms=hour), Verified)


def test_an_exposure_is_a_signed_command_naming_its_round_seat_and_card() -> None:
    v = verifier()
    body = command(type="supervisor_expose", seat=4, card="5C")
    del body["reason"]
    got = v.verify(sign_command(K1, body), "TP1", NOW)
    assert isinstance(got, Verified) and got.command == {"type": "supervisor_expose", "seat": 4, "card": "5C",
                                                          "reason": None}
    for bad, why in (({"seat": "4"}, "seat"), ({"seat": 0}, "seat"), ({"card": "5C!"}, "card"),
                     ({"card": ""}, "card"), ({"round_id": None}, "round_id"), ({"seat": True}, "seat")):
        refused = v.verify(sign_command(K1, {**body, **bad}), "TP1", NOW)
        assert isinstance(refused, Refused) and refused.kind == "malformed" and why in refused.reason, (bad, refused)
    missing = {k: x for k, x in body.items() if k != "card"}
    assert "card: Field required" in v.verify(sign_command(K1, missing), "TP1", NOW).reason  # type: ignore[union-attr]


def test_authenticity_is_checked_before_table_and_time() -> None:
    forged = {**GOOD, "reason": "x"}
    assert verifier().verify(forged, "TP2", NOW + 10**9).kind == "bad_signature"  # type: ignore[union-attr]
    assert verifier().verify(sign_command(K1, command(supervisor="sup-eve")), "TP2", 0).kind == "unknown_supervisor"  # type: ignore[union-attr]
    assert verifier().verify(GOOD, "TP2", NOW + 10**9).kind == "wrong_table"  # type: ignore[union-attr]


@pytest.mark.parametrize("sups, kw, message", [
    ({"sup-ana": ([], None)}, {}, "needs at least one key"),
    ({"sup-ana": ([b"short"], None)}, {}, "supervisor sup-ana, key #1: a 5-byte key is too short"),
    ({"sup ana": ([K1], None)}, {}, "supervisor id 'sup ana'"),
    ({}, {"max_age_ms": 0}, "max_age_ms must be positive"),
    ({}, {"max_skew_ms": -1}, "max_skew_ms must not be negative"),
])
def test_verifier_construction_errors(sups: dict[str, Any], kw: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        verifier(supervisors=sups, **kw)


def test_a_verifier_without_supervisors_refuses_everything() -> None:
    v = verifier(supervisors={})
    assert v.supervisors == [] and v.verify(GOOD, "TP1", NOW).kind == "unknown_supervisor"  # type: ignore[union-attr]


# --- hypothesis: nothing but a genuine command verifies ----------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)
FIELDS = list(GOOD)


@st.composite
def mutations(draw: st.DrawFn) -> dict[str, Any]:
    obj = dict(GOOD)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["replace", "delete", "add", "edit_string", "bump_int"]))
        name = draw(st.sampled_from(FIELDS))
        if op == "replace":
            obj[name] = draw(json_values)
        elif op == "delete":
            obj.pop(name, None)
        elif op == "add":
            obj[draw(st.text(min_size=1, max_size=12))] = draw(json_values)
        elif op == "edit_string" and isinstance(obj.get(name), str) and obj[name]:
            s = obj[name]
            i = draw(st.integers(0, len(s) - 1))
            obj[name] = s[:i] + draw(st.characters()) + s[i + 1:]
        elif op == "bump_int" and isinstance(obj.get(name), int):
            obj[name] = obj[name] + draw(st.integers(-10**6, 10**6))
    return obj


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(mutations())
def test_random_mutations_never_verify(obj: dict[str, Any]) -> None:
    v = verifier()
    got = v.verify(obj, "TP1", NOW)
    if canonical_or_none(obj) == canonical_bytes(GOOD) and obj.get("signature") == GOOD["signature"]:
        assert isinstance(got, Verified)  # the mutation changed nothing signed (e.g. same value back)
    else:
        assert isinstance(got, Refused) and got.kind in REFUSAL_KINDS


def canonical_or_none(obj: dict[str, Any]) -> bytes | None:
    try:
        return canonical_bytes(obj)
    except ValueError:
        return None


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=12), json_values, max_size=10) | json_values)
def test_arbitrary_json_never_verifies_nor_raises(obj: Any) -> None:
    got = verifier().verify(obj, "TP1", NOW)
    assert isinstance(got, Refused) and got.kind in REFUSAL_KINDS


ids = st.from_regex(r"[A-Za-z0-9_.:\-]{1,64}", fullmatch=True)
reasons = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=200).filter(str.strip)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(ids, ids, st.from_regex(r"[A-Za-z0-9_]{1,32}", fullmatch=True), ids, st.integers(0, 2**53 - 1), reasons,
       st.integers(-MAX_SKEW, MAX_AGE))
def test_every_well_formed_signed_command_verifies(cid: str, sup: str, table: str, rid: str, at: int, reason: str,
                                                   delay: int) -> None:
    v = verifier(supervisors={sup: ([K1], None)})
    c = {"type": "supervisor_void", "command_id": cid, "supervisor": sup, "table_id": table, "round_id": rid,
         "issued_at": at, "reason": reason}
    wire = json.loads(json.dumps(sign_command(K1, c), ensure_ascii=False))  # through JSON and back
    got = v.verify(wire, table, at + delay)
    assert isinstance(got, Verified) and got.command == {"type": "supervisor_void", "reason": reason}
    assert (got.supervisor, got.command_id, got.table_id, got.round_id, got.issued_at) == (sup, cid, table, rid, at)


# --- key files ------------------------------------------------------------------------------------


def write_key(path: Path, content: str | bytes, mode: int = 0o600) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    path.chmod(mode)
    return path


def test_key_files_are_read_as_hex(tmp_path: Path) -> None:
    assert read_hex_key(write_key(tmp_path / "a.key", K1.hex() + "\n"), "x") == K1
    assert read_hex_key(write_key(tmp_path / "b.key", "  " + K2.hex().upper() + "\r\n"), "x") == K2
    assert read_hex_key(write_key(tmp_path / "c.key", " ".join(f"{b:02x}" for b in K1)), "x") == K1


@pytest.mark.parametrize("content, message", [
    (None, "cannot be read: it does not exist"),
    ("dir", "cannot be read: it is a directory"),
    ("not hex at all", "must hold the key as hex digits"),
    ("abc", "must hold the key as hex digits"),
    ("00" * 15, "holds a 15-byte key; at least 16 bytes are needed"),
    ("", "holds a 0-byte key"),
    (b"\xff\xfe" + b"00" * 16, "cannot be read as hex text: it holds non-ASCII bytes"),
    ("00" * 5000, "is larger than 4096 bytes: not a key file"),
])
def test_bad_key_files_are_one_clear_line_naming_the_file(tmp_path: Path, content: Any, message: str) -> None:
    path = tmp_path / "sup-ana.key"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        write_key(path, content)
    with pytest.raises(ValueError) as err:
        read_hex_key(path, "supervisor sup-ana: key file")
    text = str(err.value)
    assert text.startswith(f"supervisor sup-ana: key file {path} ") and message in text and "\n" not in text


def security_settings(tmp_path: Path, **security: Any) -> Any:
    tables = [{"id": t, "game": "teen-patti", "scanner": {"kind": "mqtt", "reader_id": f"R{t}"}} for t in ("TP1", "TP2")]
    return load_settings(tables=tables, security=security, mqtt={"url": "mqtt://127.0.0.1:1883"})


def test_supervisor_verifier_from_config(tmp_path: Path) -> None:
    old, new = write_key(tmp_path / "old.key", K1.hex()), write_key(tmp_path / "new.key", K2.hex())
    ben = write_key(tmp_path / "ben.key", K_BEN.hex())
    s = security_settings(tmp_path, supervisor_max_age_seconds=2.5, supervisor_max_skew_seconds=0,
                          supervisors=[{"id": "sup-ana", "key_files": [str(old), str(new)]},
                                       {"id": "sup-ben", "key_files": [str(ben)], "tables": ["TP2"]}])
    v = supervisor_verifier(s.security)
    assert (v.max_age_ms, v.max_skew_ms, v.supervisors) == (2500, 0, ["sup-ana", "sup-ben"])
    assert v.verify(sign_command(K2, command()), "TP1", NOW).key_index == 1  # type: ignore[union-attr]
    assert v.verify(sign_command(K_BEN, command(supervisor="sup-ben")), "TP1", NOW).kind == "not_allowed_table"  # type: ignore[union-attr]
    assert supervisor_verifier(security_settings(tmp_path).security).supervisors == []
    write_key(new, "zz")
    with pytest.raises(ValueError, match=f"supervisor sup-ana: key file {re.escape(str(new))} must hold the key as hex"):
        supervisor_verifier(s.security)


def test_scanner_keys_use_the_same_reader(tmp_path: Path) -> None:
    from dealer.edge.service import scanner_authenticator

    bad = write_key(tmp_path / "scanner.key", "00" * 8)
    s = load_settings(tables=[{"id": "T1", "game": "teen-patti", "scanner": {
        "kind": "mqtt", "reader_id": "GW1", "hmac_key_files": [str(bad)], "require_mac": True}}])
    with pytest.raises(ValueError, match=f"^scanner GW1: HMAC key file {re.escape(str(bad))} holds a 8-byte key"):
        scanner_authenticator(s.tables[0].scanner)
    assert keys.read_hex_keys([], "x") == []


# --- configuration ------------------------------------------------------------------------------


def test_security_defaults_and_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    s = load_settings()
    assert (s.security.supervisor_max_age_seconds, s.security.supervisor_max_skew_seconds) == (30, 5)
    assert (s.security.max_age_ms, s.security.max_skew_ms, s.security.supervisors) == (30_000, 5_000, [])
    monkeypatch.setenv("DEALER_SECURITY__SUPERVISOR_MAX_AGE_SECONDS", "12.5")
    assert load_settings().security.max_age_ms == 12_500


@pytest.mark.parametrize("security, message", [
    ({"supervisors": [{"id": "sup-ana", "key_files": ["/a"]}, {"id": "sup-ana", "key_files": ["/b"]}]},
     "duplicate supervisor ids: sup-ana"),
    ({"supervisors": [{"id": "sup-ana", "key_files": ["/a"], "tables": ["TP1", "XX9"]}]},
     "supervisor sup-ana names table XX9, not in [[tables]] (tables: TP1, TP2)"),
    ({"supervisors": [{"id": "sup-ana", "key_files": ["/a"], "tables": ["TP1", "TP1"]}]},
     "security.supervisors.0.tables: a table is named twice"),
    ({"supervisors": [{"id": "sup-ana", "key_files": []}]}, "security.supervisors.0.key_files: List should have at least 1"),
    ({"supervisors": [{"id": "sup-ana"}]}, "security.supervisors.0.key_files: Field required"),
    ({"supervisors": [{"id": "sup ana", "key_files": ["/a"]}]}, "security.supervisors.0.id: String should match pattern"),
    ({"supervisors": [{"id": "sup-ana", "key_files": ["/a"], "key": "00"}]}, "security.supervisors.0.key: Extra inputs"),
    ({"supervisor_max_age_seconds": 0}, "security.supervisor_max_age_seconds: Input should be greater than 0"),
    ({"supervisor_max_age_seconds": "inf"}, "security.supervisor_max_age_seconds"),
    ({"supervisor_max_skew_seconds": -1}, "security.supervisor_max_skew_seconds: Input should be greater than or equal"),
    ({"max_age": 30}, "security.max_age: Extra inputs are not permitted"),
])
def test_security_config_errors_are_clear(tmp_path: Path, security: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        security_settings(tmp_path, **security)
    assert message in str(err.value)


def test_example_config_supervisor_blocks_are_valid_once_uncommented() -> None:
    text = (ROOT / "deploy" / "tables" / "example.toml").read_text()
    assert load_settings(ROOT / "deploy" / "tables" / "example.toml").security.supervisors == []
    uncommented = re.sub(r"(?m)^# (\[\[security\.supervisors\]\]|id = |key_files = |tables = )", r"\1", text)
    security = load_settings(**tomllib.loads(uncommented)).security
    assert [(s.id, s.tables) for s in security.supervisors] == [("sup-ana", []), ("sup-ben", ["ST1", "SD1"])]


def test_check_deployment_flags_supervisor_key_files(tmp_path: Path) -> None:
    good = write_key(tmp_path / "ana.key", K1.hex())
    loose = write_key(tmp_path / "ben.key", K_BEN.hex(), 0o640)
    s = security_settings(tmp_path, supervisors=[{"id": "sup-ana", "key_files": [str(good)]},
                                                 {"id": "sup-ben", "key_files": [str(loose)]}])
    assert check_deployment(s, None) == [
        f"supervisor sup-ben key file {loose} is accessible by group or others (mode 0640): it must be private "
        f"to the backend's user (chmod 600 {loose})"]
    loose.chmod(0o600)
    assert check_deployment(s, None) == []
    missing = tmp_path / "gone.key"
    s2 = security_settings(tmp_path, supervisors=[{"id": "sup-ana", "key_files": [str(good), str(missing)]}])
    assert check_deployment(s2, None) == [f"supervisor sup-ana key file {missing} does not exist"]


def test_check_deployment_flags_a_shared_key_file(tmp_path: Path) -> None:
    shared = write_key(tmp_path / "shared.key", K1.hex())
    s = security_settings(tmp_path, supervisors=[{"id": "sup-ana", "key_files": [str(shared)]},
                                                 {"id": "sup-ben", "key_files": [str(shared)]}])
    assert check_deployment(s, None) == [f"key file {shared} is shared by supervisor sup-ana and supervisor sup-ben: "
                                         "every scanner and every supervisor needs its own key"]
    tables = [{"id": "TP1", "game": "teen-patti",
               "scanner": {"kind": "mqtt", "reader_id": "GW1", "hmac_key_files": [str(shared)]}}]
    s2 = load_settings(tables=tables, security={"supervisors": [{"id": "sup-ana", "key_files": [str(shared)]}]},
                       mqtt={"url": "mqtt://127.0.0.1:1883"})
    assert check_deployment(s2, None) == [f"key file {shared} is shared by scanner GW1 and supervisor sup-ana: "
                                          "every scanner and every supervisor needs its own key"]


# --- the signing tool: a real process, a real broker ---------------------------------------------


def void_args(key: Path, url: str, *extra: str, table: str = "TP1", round_id: str = "TP1-000044") -> list[str]:
    return ["void", table, round_id, "--reason", "shoe jammed — cards exposed", "--supervisor", "sup-ana",
            "--key-file", str(key), "--broker", url, *extra]


class Inbox:
    def __init__(self, client: aiomqtt.Client) -> None:
        self.got: list[aiomqtt.Message] = []
        self._task = asyncio.get_running_loop().create_task(self._read(client))

    async def _read(self, client: aiomqtt.Client) -> None:
        async for m in client.messages:
            self.got.append(m)

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@contextlib.asynccontextmanager
async def subscriber(host: str, port: int, topic: str, **kw: Any) -> AsyncIterator[Inbox]:
    async with aiomqtt.Client(host, port, identifier=f"watch-{uuid.uuid4().hex[:8]}", timeout=10, **kw) as client:
        await client.subscribe(topic, qos=1)
        box = Inbox(client)
        try:
            yield box
        finally:
            await box.close()


def assert_one_line_no_traceback(rc: int, out: str, err: str, expected: str) -> None:
    assert (rc, out) == (2, ""), (rc, out, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("dealer supervisor void: ") and expected in err, err


async def test_void_publishes_a_command_that_verifies(broker: Broker, tmp_path: Path) -> None:
    key = write_key(tmp_path / "sup-ana.key", K1.hex() + "\n")
    v = verifier()
    async with subscriber("127.0.0.1", broker.port, "studio/v1/tables/+/supervisor") as inbox:
        before = time.time_ns() // 1_000_000
        rc, out, err = await supervisor_cli(*void_args(key, broker.url, "--timeout", "2"), env=with_checkout())
        after = time.time_ns() // 1_000_000
        assert rc == 4 and "no backend is online" in err, err  # no backend here: published, never answered
        await wait_until(lambda: inbox.got, what="the published command")
        rc2, out2, err2 = await supervisor_cli(*void_args(key, broker.url, "--command-id", "ticket-4711", "--timeout", "2"), env=with_checkout())
        assert rc2 == 4, err2
        await wait_until(lambda: len(inbox.got) == 2, what="the second command")
    first, second = inbox.got
    assert str(first.topic) == "studio/v1/tables/TP1/supervisor" and first.qos == 1 and not first.retain
    assert bytes(first.payload).decode() == out.strip()  # type: ignore[arg-type]
    published = json.loads(out)
    assert list(published) == ["type", "command_id", "supervisor", "table_id", "round_id", "issued_at", "reason",
                               "signature"]
    assert before <= published["issued_at"] <= after
    assert re.fullmatch(r"void-[0-9a-f]{32}", published["command_id"])
    got = v.verify(json.loads(bytes(first.payload)), "TP1", after)  # type: ignore[arg-type]
    assert isinstance(got, Verified), got
    assert (got.supervisor, got.round_id, got.command, got.key_index) == (
        "sup-ana", "TP1-000044", {"type": "supervisor_void", "reason": "shoe jammed — cards exposed"}, 0)
    again = v.verify(json.loads(bytes(second.payload)), "TP1", json.loads(out2)["issued_at"])  # type: ignore[arg-type]
    assert isinstance(again, Verified) and again.command_id == "ticket-4711"
    assert json.loads(out2)["command_id"] == "ticket-4711" and again.digest != got.digest


def bad_cases(tmp_path: Path, url: str) -> list[tuple[list[str], str]]:
    """(arguments, what the one line on stderr says) for every kind of bad input."""
    key = write_key(tmp_path / "sup-ana.key", K1.hex())
    short = write_key(tmp_path / "short.key", "00" * 8)
    nothex = write_key(tmp_path / "nothex.key", "hello")
    loose = write_key(tmp_path / "loose.key", K1.hex(), 0o644)
    good = void_args(key, url)
    return [
        (void_args(tmp_path / "missing.key", url), f"--key-file {tmp_path / 'missing.key'} cannot be read: it does not exist"),
        (void_args(short, url), f"--key-file {short} holds a 8-byte key"),
        (void_args(nothex, url), f"--key-file {nothex} must hold the key as hex digits"),
        (void_args(loose, url), f"--key-file {loose} is accessible by group or others (mode 0644)"),
        (void_args(key, "http://127.0.0.1:1883"), "--broker: broker URL 'http://127.0.0.1:1883' must look like"),
        (void_args(key, "127.0.0.1:1883"), "--broker: broker URL"),
        (void_args(key, url, round_id="TP1 44"), "ROUND: String should match pattern"),
        (void_args(key, url, table="TP-1"), "TABLE: String should match pattern"),
        (void_args(key, url)[:6] + ["sup/ana"] + void_args(key, url)[7:], "--supervisor: String should match pattern"),
        (void_args(key, url, "--command-id", "x" * 65), "--command-id: String should have at most 64"),
        (good[:4] + ["   "] + good[5:], "--reason: Value error, must not be blank"),
        (good[:4] + ["r" * 201] + good[5:], "--reason: String should have at most 200"),
        (void_args(key, url, "--ca-file", str(tmp_path / "ca.crt")), "--ca-file given but the broker"),
        (void_args(key, url.replace("mqtt:", "mqtts:"), "--ca-file", str(tmp_path / "none.crt")),
         "TLS files (--ca-file) cannot be loaded"),
        (void_args(key, url, "--password-file", str(tmp_path / "pw")), f"--password-file {tmp_path / 'pw'} cannot be read"),
        (void_args(key, f"mqtt://127.0.0.1:{free_tcp_port()}"), "Connection refused"),
        (void_args(key, url, "--timeout", "0"), "--timeout 0.0: give 0 < seconds <= 600"),
    ]


def test_bad_input_is_one_line_and_exit_2(broker: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every case in-process (fast); the subprocess test below runs a few for real."""
    from dealer.cli.main import main

    silent = socket.socket()  # accepts TCP connections, never speaks MQTT: the CONNACK never comes
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    cases = bad_cases(tmp_path, broker.url) + [
        (void_args(tmp_path / "sup-ana.key", f"mqtt://127.0.0.1:{silent.getsockname()[1]}", "--timeout", "1"),
         "did not acknowledge within 1 s (is it reachable?)")]
    try:
        for args, expected in cases:
            rc = main(["supervisor", *args])
            out, err = capsys.readouterr()
            assert_one_line_no_traceback(rc, out, err, expected)
    finally:
        silent.close()


async def test_bad_input_as_a_process_exits_2_and_publishes_nothing(broker: Broker, tmp_path: Path) -> None:
    cases = bad_cases(tmp_path, broker.url)
    some = [cases[i] for i in (0, 4, 6, 15)]  # a key file, a broker URL, an id, a broker that is down
    async with subscriber("127.0.0.1", broker.port, "studio/v1/#") as inbox:
        results = await asyncio.gather(*(supervisor_cli(*args, env=with_checkout()) for args, _ in some))
        for result, (_, expected) in zip(results, some):
            assert_one_line_no_traceback(*result, expected)
        # a good command afterwards is the only message the broker ever carried
        rc, out, err = await supervisor_cli(*void_args(tmp_path / "sup-ana.key", broker.url, "--timeout", "2"), env=with_checkout())
        assert rc == 4, err  # published; no backend here to answer it
        await wait_until(lambda: inbox.got, what="the good command")
        assert [bytes(m.payload).decode() for m in inbox.got] == [out.strip()]  # type: ignore[arg-type]


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_missing_arguments_are_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    from dealer.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["supervisor", "void", "TP1", "TP1-000044"])
    assert exit_.value.code == 2
    assert "the following arguments are required: --reason, --supervisor, --key-file, --broker" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["supervisor", "void", "TP1", "R", "--reason", "r", "--supervisor", "s", "--key-file", "k", "--broker",
              "mqtt://h", "--password", "p", "--password-file", "f"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_every_option_has_help_text() -> None:
    import argparse

    from dealer.cli.main import build_parser
    from dealer.cli.supervisor import register

    assert build_parser().parse_args(["supervisor", "keygen", "--out", "k"]).func.__name__ == "_cmd_keygen"
    sup = register(argparse.ArgumentParser().add_subparsers())
    [subs] = [a for a in sup._actions if isinstance(a, argparse._SubParsersAction)]
    commands = subs.choices
    assert set(commands) == {"void", "expose", "keygen", "open-round", "pause", "resume", "close", "reopen"}
    for name, sub in commands.items():
        for action in sub._actions:
            assert action.help, f"dealer supervisor {name}: {action.option_strings or action.dest} has no help"


async def test_keygen_writes_a_private_key_and_refuses_to_overwrite(broker: Broker, tmp_path: Path) -> None:
    out = tmp_path / "sup-ana.key"
    rc, stdout, err = await supervisor_cli("keygen", "--out", str(out), env=with_checkout())
    assert (rc, stdout.strip(), err) == (0, str(out), "")
    assert out.stat().st_mode & 0o777 == 0o600 and re.fullmatch(r"[0-9a-f]{64}\n", out.read_text())
    key = read_hex_key(out, "x")
    assert len(key) == 32 and key.hex() not in stdout
    from dealer.cli.main import main

    with contextlib.redirect_stderr(io.StringIO()) as err_io, contextlib.redirect_stdout(io.StringIO()) as out_io:
        assert main(["supervisor", "keygen", "--out", str(out)]) == 2
        assert main(["supervisor", "keygen", "--out", str(tmp_path / "no" / "such" / "dir.key")]) == 2
    assert out_io.getvalue() == "" and read_hex_key(out, "x") == key
    assert err_io.getvalue().splitlines() == [
        f"dealer supervisor keygen: {out} already exists: refusing to overwrite a key",
        f"dealer supervisor keygen: cannot create {tmp_path / 'no' / 'such' / 'dir.key'}: No such file or directory"]
    # the key works with the tool and with the backend's verifier
    async with subscriber("127.0.0.1", broker.port, "studio/v1/tables/TP1/supervisor") as inbox:
        rc, published, err = await supervisor_cli(*void_args(out, broker.url, "--timeout", "2"), env=with_checkout())
        assert rc == 4, err  # published; no backend here to answer it
        await wait_until(lambda: inbox.got, what="the command")
    v = verifier(supervisors={"sup-ana": ([key], None)})
    assert isinstance(v.verify(json.loads(bytes(inbox.got[0].payload)), "TP1",  # type: ignore[arg-type]
                               json.loads(published)["issued_at"]), Verified)


SUPERVISOR_ACL = """\
user sup-ana-console
topic write studio/v1/tables/T1/supervisor

user watcher
topic read studio/v1/#
"""


@pytest.fixture
def tls_broker(tmp_path: Path) -> Any:
    certs = make_test_ca(tmp_path / "tls")
    work = tmp_path / "secure"
    work.mkdir()
    b = SecureMosquitto(work, certs, {"sup-ana-console": "pw-console", "watcher": "pw-watcher"}, SUPERVISOR_ACL)
    b.start()
    yield b
    b.stop()


async def test_void_over_tls_with_a_password_file(tls_broker: SecureMosquitto, tmp_path: Path) -> None:
    key = write_key(tmp_path / "sup-ana.key", K2.hex())
    pw = write_key(tmp_path / "console.pw", "pw-console\n")
    wrong = write_key(tmp_path / "wrong.pw", "guess\n")
    tls = ["--username", "sup-ana-console", "--ca-file", str(tls_broker.ca_file)]
    async with subscriber("127.0.0.1", tls_broker.tls_port, "studio/v1/tables/+/supervisor", username="watcher",
                          password="pw-watcher", tls_context=make_tls_context(tls_broker.ca_file)) as inbox:
        assert_one_line_no_traceback(*await supervisor_cli(*void_args(key, tls_broker.tls_url, *tls, "--password-file",
                                                                str(wrong), table="T1"), env=with_checkout()), "uthori")
        assert_one_line_no_traceback(*await supervisor_cli(*void_args(key, tls_broker.tls_url, "--username",
                                                                "sup-ana-console", "--password-file", str(pw),
                                                                table="T1"), env=with_checkout()),
            "signed by an unknown CA: give that CA file (ca_file, --ca-file) [CERTIFICATE_VERIFY_FAILED]")
        rc, out, err = await supervisor_cli(*void_args(key, tls_broker.tls_url, *tls, "--password-file", str(pw),
                                                 "--timeout", "2", table="T1", round_id="T1-000007"), env=with_checkout())
        assert rc == 4 and "no backend is online" in err, err  # published; no backend here
        await wait_until(lambda: inbox.got, what="the command over TLS")
    [msg] = inbox.got
    assert str(msg.topic) == "studio/v1/tables/T1/supervisor" and bytes(msg.payload).decode() == out.strip()  # type: ignore[arg-type]
    got = verifier(supervisors={"sup-ana": ([K1, K2], ["T1"])}).verify(
        json.loads(out), "T1", json.loads(out)["issued_at"])
    assert isinstance(got, Verified) and got.key_index == 1 and got.round_id == "T1-000007"
