"""``dealer bench fuzz``: every parser that reads bytes from outside, fed generated garbage.

No network and no corpus files: a seeded :class:`random.Random` builds each input from a
corpus of *valid* seeds taken from the code itself (``encode_frame`` of valid frames,
``model_dump_json`` of the messages a real round produces, the configuration of real
tables) and then breaks it: bit flips, truncation, splicing, field swaps, huge numbers,
unicode, NaN and floats where money goes, deep nesting, overlong lines, CRCs recomputed
after a mutation so the damage reaches the field checks.

The contract checked for every input of every target:

* **no crash**: a parser may only refuse an input with its documented exception
  (:class:`~drivers.frames.FrameError`, pydantic ``ValidationError``,
  :class:`~dealer.edge.config.ConfigError`, ``ValueError`` from ``json``); the stream decoder,
  the MQTT scanner ingest and the service's command handler may not raise at all;
* **every rejection carries a reason**: a non-empty message (and, for frames, a reason
  category; for the service, one refusal and a published ``rejected`` event);
* **no hang**: each call is timed; one taking longer than ``slow_s`` (1 s) is reported;
* a few cheap oracles: an accepted message re-validates from its own JSON, a decoded frame
  re-encodes to the same bytes, the stream decoder's output does not depend on how the
  bytes were chunked, a refused command changes no table, a frame without a valid MAC
  at an authenticating reader becomes one ``FORGED`` input that changes no session state,
  a configuration ``load_settings`` accepts builds the service's tables.

Anything else is a **finding**: recorded with the exception, where it was raised, how
often and a few example inputs (``repr``, truncated), deduplicated by (target, kind,
exception, location). ``run_fuzz`` returns stable JSON (timings aside) for a seed.

``stud_commands``, ``seotda_commands`` and ``matgo_commands`` (:mod:`tools.fuzz_games`) play
rounds of the peer games on a live service and fuzz their players' and station's commands
there, with the games' own invariants (one clear answer, refusals change nothing, no action
applied twice, chips conserved, the journal and its replay).

``--engine atheris`` runs the same targets coverage-guided (libFuzzer through atheris),
one child process per target, when atheris is installed (it is optional).

Inputs are derived from ``(seed, target, index)``, so a stateless target's finding can
be regenerated with :func:`generate_input`; the stateful ones (``reader_session``,
``scanner_ingest``, ``service_actions``) also depend on the inputs before it, and the
recorded example input is the reproduction.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import logging
import math
import mmap
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

SLOW_S = 1.0
MAX_EXAMPLES = 3
_REPR_LIMIT = 400
_MSG_LIMIT = 300
_MAX_INPUT = 1 << 20  # mutated inputs are capped at 1 MiB
#: The HMAC key of the readers the harness signs for, and a key no reader has (forgeries).
KEY = bytes(range(32))
OTHER_KEY = bytes(range(100, 132))

TARGETS: tuple[str, ...] = (
    "frame_decode",
    "frame_stream",
    "beetek_stream",
    "reader_session",
    "scanner_json",
    "scanner_ingest",
    "actions",
    "events",
    "round_result",
    "player_message",
    "station_prompt",
    "round_event",
    "service_actions",
    "config",
    # the peer games' commands on a live service (tools/fuzz_games.py)
    "stud_commands",
    "seotda_commands",
    "matgo_commands",
)
#: The targets that run a live service and play rounds (slower: a group commit per input).
GAME_TARGETS: tuple[str, ...] = ("stud_commands", "seotda_commands", "matgo_commands")


class Violation(Exception):
    """A property of the contract does not hold (not an exception of the code under test).
    ``key`` groups the same broken property across inputs (default: the message)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = (key or message)[:80]


# --- values that break parsers --------------------------------------------------------------


class Raw(str):
    """A JSON/TOML fragment emitted verbatim (numbers no float holds, deep nesting, NaN ...)."""


_INTS = (0, 1, -1, 2, 7, 99, 100, 255, 256, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1,
         2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63), -(2**63) - 1, 10**18, 10**26, 10**30)
_RAW_NUMBERS = ("0", "-0", "1", "-1", "0.0", "-0.0", "1.5", "0.1", "1e308", "1e309", "-1e309", "1e-400",
                "5e-324", "NaN", "Infinity", "-Infinity", "4294967295", "4294967296", "18446744073709551616",
                "9223372036854775807", "-9223372036854775809", "1" + "0" * 26, "1" + "0" * 30, "1" + "0" * 400,
                "9" * 4400, "1E+999999999", "1e26", "1e-999999999", "123456789012345678901234567890.123")
_STRINGS = ("", " ", "\x00", "\n", "\r\n", "\t", "\x7f", "A" * 17, "a" * 65, "x" * 5000, "\ud800", "\udfff",
            "\U0001f600", "\u202e", "e\u0301", "\u2135", "\u0661\u0662\u0663", "\uff11\uff10", "\ufeff",
            "1_000", "+10", " 10 ", "10.", ".5", "1e26", "1e999999999", "1E+999999999", "-5", "0", "0.001",
            "NaN", "sNaN", "-Infinity", "Infinity", "10.00", "0.005", "99999999999999999999999999.99", "null",
            "true", "{}", "[]", "$", "*", ",", "\\", '"', "%s", "{0}", "../../x", "/dev/null", "OK", "HB",
            "BOOT", "FAULT", "place_bet", "open_round", "studio/v1/tables/T1/actions", "+", "#", "SC1", "T1",
            "T1-000001", "p1", "AS", "TD", "10S", "ZZ", "01G", "PLAY", "FOLD", "DOWN", "HALF_UP", "teen-patti",
            "sevenluck", "mqtt", "serial", "EUR", "1979-05-27T07:32:00Z")
_TOKENS = (b"$", b"*", b",", b"\r\n", b"\n", b"\r", b"\x00", b"\xff", b"\x7f", b'"', b"{", b"}", b"[", b"]",
           b":", b"=", b"\\", b"\\u0000", b"\\ud800", b"\\udfff\\ud800", b"\xed\xa0\x80", b"\xc0\x80", b"\xef\xbb\xbf",
           b"NaN", b"-Infinity", b"1e999", b"-", b"0000000000", b"9" * 30, b'"x":1,', b"null", b"true",
           "\U0001f600".encode(), b"\t", b" ", b"'''", b'"""', b"#", b"[[tables]]\n", b"\n[service]\n",
           b"OK", b"HB", b"BOOT", b"FAULT", b"4294967296", b"AS", b"0000")
_INTERESTING_BYTES = (0x00, 0x01, 0x09, 0x0A, 0x0D, 0x20, 0x22, 0x24, 0x2A, 0x2C, 0x2D, 0x30, 0x39, 0x3A, 0x41,
                      0x5B, 0x5C, 0x5D, 0x7B, 0x7D, 0x7E, 0x7F, 0x80, 0xC0, 0xED, 0xFE, 0xFF)
_UNICODE_RANGES = ((0x20, 0x7E), (0xA0, 0x2FF), (0x300, 0x36F), (0x400, 0x4FF), (0x600, 0x6FF), (0x2000, 0x206F),
                   (0xD800, 0xDFFF), (0xFF00, 0xFFFF), (0x1F600, 0x1F64F), (0x10000, 0x10FFFF))


def _unicode_text(rng: random.Random, n: int | None = None) -> str:
    n = rng.randrange(1, 24) if n is None else n
    lo, hi = rng.choice(_UNICODE_RANGES)
    return "".join(chr(rng.randint(lo, hi)) for _ in range(n))


def _deep(rng: random.Random) -> int:
    """A nesting depth, log-uniform up to 20 000 (parsers' limits sit around 200 and 1000)."""
    return int(10 ** rng.uniform(0.5, 4.3))


def _nested(rng: random.Random, inner: str = "1") -> Raw:
    d = _deep(rng)
    if rng.random() < 0.5:
        return Raw("[" * d + inner + "]" * d)
    return Raw('{"a":' * d + inner + "}" * d)


def interesting(rng: random.Random, strings: tuple[str, ...] = ()) -> Any:
    """One value of a random JSON type, biased to edges."""
    r = rng.random()
    if r < 0.08:
        return None
    if r < 0.14:
        return rng.random() < 0.5
    if r < 0.30:
        return rng.choice(_INTS) * rng.choice((1, 1, -1))
    if r < 0.44:
        return Raw(rng.choice(_RAW_NUMBERS))
    if r < 0.50:
        return rng.choice((math.nan, math.inf, -math.inf, 1e308, 5e-324, 0.1, -0.0, rng.uniform(-1e6, 1e6)))
    if r < 0.68:
        return rng.choice(_STRINGS)
    if r < 0.76 and strings:
        return rng.choice(strings)
    if r < 0.82:
        return _unicode_text(rng)
    if r < 0.86:
        return f"{rng.randrange(10 ** rng.randrange(1, 30))}.{rng.randrange(1000):0{rng.randrange(1, 4)}d}"
    if r < 0.90:
        return []
    if r < 0.93:
        return {}
    if r < 0.96:
        return [interesting(rng, strings)]
    if r < 0.98:
        return {rng.choice(_STRINGS): interesting(rng, strings)}
    return _nested(rng)


def dump_json(obj: Any, *, ascii: bool = True) -> str:
    """JSON text of ``obj``; :class:`Raw` verbatim, NaN/Infinity as the bare tokens."""
    if isinstance(obj, Raw):
        return str(obj)
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        if math.isnan(obj):
            return "NaN"
        if math.isinf(obj):
            return "Infinity" if obj > 0 else "-Infinity"
        return repr(obj)
    if isinstance(obj, (str, Decimal)):
        return json.dumps(str(obj), ensure_ascii=ascii)
    if isinstance(obj, dict):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=ascii)}:{dump_json(v, ascii=ascii)}"
                              for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dump_json(v, ascii=ascii) for v in obj) + "]"
    return json.dumps(str(obj), ensure_ascii=ascii)


def encode_text(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate becomes invalid UTF-8, as on a wire


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(k: Any) -> str:
    k = str(k)
    return k if _BARE_KEY.fullmatch(k) else json.dumps(k, ensure_ascii=False)


def _toml_value(v: Any) -> str:
    if isinstance(v, Raw):
        return str(v)
    if v is None:
        return "null"  # TOML has none: a syntax error, on purpose
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)


def dump_toml(doc: Any) -> str:
    """TOML text of a configuration-shaped document (top-level sections, arrays of tables)."""
    if not isinstance(doc, dict):
        return f"value = {_toml_value(doc)}\n"
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in doc.items()
             if not isinstance(v, dict) and not (isinstance(v, list) and v and all(isinstance(x, dict) for x in v))]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"\n[{_toml_key(k)}]")
            lines += [f"{_toml_key(kk)} = {_toml_value(vv)}" for kk, vv in v.items()]
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                lines.append(f"\n[[{_toml_key(k)}]]")
                lines += [f"{_toml_key(kk)} = {_toml_value(vv)}" for kk, vv in item.items()]
    return "\n".join(lines) + "\n"


# --- mutators ---------------------------------------------------------------------------------


def mutate_bytes(data: bytes, rng: random.Random, others: list[bytes] | tuple[bytes, ...] = ()) -> bytes:
    """1-6 stacked byte-level mutations (AFL-style havoc)."""
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4, 6))):
        op = rng.randrange(14)
        n = len(b)
        i = rng.randrange(n + 1)
        if op == 0 and n:  # bit flip
            j = rng.randrange(n)
            b[j] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # interesting byte
            b[rng.randrange(n)] = rng.choice(_INTERESTING_BYTES)
        elif op in (2, 3):  # token
            b[i:i] = rng.choice(_TOKENS)
        elif op == 4 and n:  # delete a range
            j = min(n, i + rng.randrange(1, 17))
            del b[i:j]
        elif op == 5 and n:  # truncate
            del b[rng.randrange(n):]
        elif op == 6 and n:  # duplicate a range
            j = min(n, i + rng.randrange(1, 33))
            b[j:j] = b[i:j]
        elif op == 7 and others:  # splice with another seed
            other = rng.choice(others)
            b = b[:i] + other[rng.randrange(len(other) + 1):]
        elif op == 8 and n > 1:  # swap two bytes
            j, k = rng.randrange(n), rng.randrange(n)
            b[j], b[k] = b[k], b[j]
        elif op == 9:  # random bytes
            b[i:i] = rng.randbytes(rng.randrange(1, 17))
        elif op == 10:  # deep nesting
            d = _deep(rng)
            b[i:i] = (b"[" * d + b"]" * d) if rng.random() < 0.6 else (b'{"a":' * d + b"1" + b"}" * d)
        elif op == 11 and n:  # repeat
            b = b * rng.randrange(2, 6)
        elif op == 12:  # a digit run becomes a huge or odd number
            runs = [m.span() for m in re.finditer(rb"[0-9]+", b)]
            if runs:
                s, e = rng.choice(runs)
                b[s:e] = rng.choice(_RAW_NUMBERS).encode()
        elif op == 13:  # unicode
            b[i:i] = encode_text(_unicode_text(rng, rng.randrange(1, 6)))
        if len(b) > _MAX_INPUT:
            del b[_MAX_INPUT:]
    return bytes(b)


def _slots(obj: Any, out: list[tuple[Any, Any]], depth: int = 0) -> None:
    if depth > 12:
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((obj, k))
            _slots(v, out, depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append((obj, i))
            _slots(v, out, depth + 1)


def mutate_tree(obj: Any, rng: random.Random, keys: tuple[str, ...], strings: tuple[str, ...]) -> Any:
    """1-3 structural mutations of a JSON-like value: replace, drop, add or swap fields,
    retype, change a discriminator, nest deep."""
    obj = copy.deepcopy(obj)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        slots: list[tuple[Any, Any]] = []
        _slots(obj, slots)
        if not slots or rng.random() < 0.02:
            return interesting(rng, strings)
        parent, key = rng.choice(slots)
        value = parent[key]
        op = rng.randrange(10)
        if op in (0, 1):
            parent[key] = interesting(rng, strings)
        elif op == 2:
            del parent[key]
        elif op == 3 and isinstance(parent, dict):
            parent[rng.choice(keys) if rng.random() < 0.7 else _unicode_text(rng)] = interesting(rng, strings)
        elif op == 4 and isinstance(parent, dict) and len(parent) > 1:  # field swap
            other = rng.choice(list(parent))
            parent[key], parent[other] = parent[other], value
        elif op == 4 and isinstance(parent, dict):  # rename
            parent[rng.choice(keys)] = parent.pop(key)
        elif op == 5:  # retype
            if isinstance(value, str) and re.fullmatch(r"-?[0-9.eE+]+", value or "x"):
                parent[key] = Raw(value)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                parent[key] = str(value) if rng.random() < 0.5 else float(value)
            elif isinstance(value, str):
                parent[key] = [value] if rng.random() < 0.5 or len(value) > 1000 else value * rng.randrange(2, 200)
            else:
                parent[key] = str(value)
        elif op == 6 and strings:  # another literal: discriminators, statuses, kinds
            parent[key] = rng.choice(strings)
        elif op == 7:
            d = _deep(rng)
            parent[key] = Raw("[" * d + dump_json(value) + "]" * d)
        elif op == 8 and isinstance(value, str):  # money-ish and unicode edits
            parent[key] = rng.choice((value + "0" * rng.randrange(1, 40), "-" + value, value + "e26", " " + value,
                                      value + _unicode_text(rng, 1), value[: rng.randrange(len(value) + 1)]))
        else:
            parent[key] = Raw(rng.choice(_RAW_NUMBERS))
    return obj


# --- the valid corpus, built from the code -----------------------------------------------------


@dataclass
class Corpus:
    frames: list[Any] = field(default_factory=list)  # Frame objects
    frame_lines: list[bytes] = field(default_factory=list)
    scanner: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    configs: list[dict[str, Any]] = field(default_factory=list)
    keys: tuple[str, ...] = ()
    strings: tuple[str, ...] = ()

    def json_seeds(self) -> list[bytes]:
        docs = self.scanner + self.actions + self.events + [m for ms in self.messages.values() for m in ms]
        return [encode_text(dump_json(d)) for d in docs]


_CORPUS: Corpus | None = None


def _collect(obj: Any, keys: set[str], strings: set[str]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            keys.add(str(k))
            _collect(v, keys, strings)
    elif isinstance(obj, list):
        for v in obj:
            _collect(v, keys, strings)
    elif isinstance(obj, str) and len(obj) <= 40:
        strings.add(obj)


def _play_round(game: str, seed: int, *, link_cut: bool = False, void: bool = False) -> list[Any]:
    """The effects of one real round at a table of ``game`` (the messages consumers parse)."""
    from dealer.edge.config import load_settings
    from dealer.core.events import (
        ActionTimeout,
        CloseBetting,
        DealerConfirm,
        DecisionTimeout,
        LinkDown,
        OpenRound,
        PlaceBet,
        PlayerAction,
        PlayerDecision,
        ScanRead,
        SupervisorVoid,
    )
    from dealer.core.table import Table

    from tools.games import kit

    stakes = kit(game).fuzz_stakes  # whole chips for Seotda and Matgo
    rng = random.Random(seed)
    settings = load_settings(service={"metrics_enabled": False},
                             tables=[{"id": "T1", "game": game, "scanner": {"kind": "mqtt", "reader_id": "SC1"}}])
    table = Table(settings.tables[0].rules())
    game_obj = table.rules.game
    effects: list[Any] = []
    draw = random.Random(f"draw-{seed}").randbytes(32).hex()  # the round's secret draw (seeded: reproducible)
    events: list[Any] = [OpenRound(round_id="T1-000001", at=1_700_000_000_000, betting_closes_at=1_700_000_015_000,
                                   draw=draw)]
    seats = game_obj.seat_count
    for k, player in enumerate(("p1", "p2", "p3")):
        for bet_type in game_obj.bet_types:
            events.append(PlaceBet(bet_id=f"b{k}-{bet_type}", player_id=player, bet_type=bet_type,
                                   stake=rng.choice(stakes), seat=k + 1 if seats else None,
                                   at=1_700_000_001_000 + k))
    if link_cut:
        events.append(LinkDown(link="scanner:SC1", reason="heartbeat timeout", at=1_700_000_002_000))
    if void:
        events.append(CloseBetting(by="timer", at=1_700_000_015_000))
        events.append(SupervisorVoid(supervisor="sup-1", reason="card dropped face up", at=1_700_000_016_000))
    for ev in events:
        effects += table.handle(ev).effects
    if table.in_play and table.current is not None:
        effects += table.handle(CloseBetting(by="timer", at=1_700_000_015_000)).effects
        cards = rng.sample(sorted(game_obj.deck), len(game_obj.deck))
        rnd, at = table.current, 1_700_000_020_000
        while rnd.phase in ("BETTING_CLOSED", "DEALING", "ACTION"):  # peer games bet between the cards
            at += 1
            if rnd.phase == "ACTION" and rnd.hand is not None:
                turn = rnd.hand.turn_options()
                actor = rnd.hand.to_act
                buttons = list(turn.get("buttons", ()))
                ev: Any
                if buttons and rng.random() < 0.5:  # Seotda: a button, which names its own amount
                    ev = PlayerAction(player_id=actor, action=rng.choice(buttons), at=at)
                elif turn.get("cards") and rng.random() < 0.7:  # Matgo: a move names a card
                    ev = PlayerAction(player_id=actor, action=turn["actions"][0], card=rng.choice(turn["cards"]), at=at)
                elif turn.get("raise") and rng.random() < 0.3:
                    ev = PlayerAction(player_id=actor, action="RAISE", amount=turn["raise"]["min"], at=at)
                else:
                    ev = ActionTimeout(turn=rnd.turn, at=at)
            elif rnd.plan[rnd.next_index].confirm:
                ev = DealerConfirm(step=rnd.plan[rnd.next_index].name, at=at)
            else:  # a Seotda rematch reshuffles: a card is new within its shuffle
                pos = rnd.plan[rnd.next_index]
                used = {rnd.cards[p.name] for p in rnd.plan if p.deck == pos.deck and p.name in rnd.cards}
                ev = ScanRead(reader="SC1", code=next(c for c in cards if c not in used), seq=at % 1000, at=at)
            effects += table.handle(ev).effects
        if table.current.phase == "DECISION":
            effects += table.handle(PlayerDecision(player_id="p1", action="PLAY", at=1_700_000_030_000)).effects
            effects += table.handle(DecisionTimeout(at=1_700_000_045_000)).effects
    return effects


def corpus() -> Corpus:
    """Valid seeds for every target, built once from the code under test."""
    global _CORPUS
    if _CORPUS is not None:
        return _CORPUS
    from dealer.core.cards import HWATU_48, STANDARD_52
    from dealer.core.events import (
        ACTION_ADAPTER,
        EVENT_ADAPTER,
        ActionTimeout,
        CardExposed,
        CloseBetting,
        DealerConfirm,
        DecisionTimeout,
        LinkDown,
        LinkUp,
        OpenRound,
        PlaceBet,
        PlayerAction,
        PlayerDecision,
        ReadFailed,
        ResultDelivered,
        ScanRead,
        SupervisorVoid,
    )
    from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, StationPrompt
    from drivers.frames import FAULT_CODES, Frame, Status, encode_frame
    from drivers.scanner_json import ScannerMessage

    rng = random.Random(20240601)
    c = Corpus()
    payloads = {Status.OK: list(STANDARD_52[:20]) + list(HWATU_48[:8]), Status.NOREAD: [""],
                Status.MISREAD: ["", "?", "A?", "??S", "XQ7?"], Status.FAULT: sorted(FAULT_CODES), Status.HB: [""],
                Status.BOOT: ["", "1.4.2", "fw-2.0.0-rc1", "V9"]}
    for reader in ("SC1", "SC2", "GW-07", "A", "0123456789ABCDEF"):
        for status, values in payloads.items():
            for payload in values:
                seq = 0 if status is Status.BOOT else rng.choice((1, 2, 41, 999, 2**31, 2**32 - 1))
                frame = Frame(reader, seq, status, payload)
                c.frames.append(frame)
                c.frame_lines.append(encode_frame(frame))
                if hasattr(frame, "sign") and rng.random() < 0.5:  # signed frames (HMAC, protocol doc §6)
                    signed = frame.sign(rng.choice((KEY, OTHER_KEY)), rng.choice((0, 1, 7, 2**32 - 1)))
                    c.frames.append(signed)
                    c.frame_lines.append(encode_frame(signed))
    c.scanner = [json.loads(ScannerMessage.of(f).model_dump_json()) for f in c.frames[::3]]
    rid = "T1-000001"
    actions = [  # commands as they come on the wire (command id, round, turn), and a few without (refused there)
        PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="10.00", round_id=rid, command_id="b1"),
        PlaceBet(bet_id="bet-2.x:y", player_id="player_7", bet_type="tie", stake="5", round_id=rid,
                 command_id="player_7-0123456789ab"),
        PlaceBet(bet_id="b3", player_id="p2", bet_type="ante", stake="25", seat=3, round_id="T2-000001",
                 command_id="c:3"),
        PlaceBet(bet_id="b4", player_id="p3", bet_type="pair_plus", stake="1.50", seat=7, at=17),
        PlayerDecision(player_id="p1", action="PLAY", round_id="T2-000001", command_id="p1-d1"),
        PlayerDecision(player_id="p2", action="FOLD"),
        CloseBetting(round_id=rid, command_id="station-1"), CloseBetting(by="timer"),
        SupervisorVoid(supervisor="sup", reason="misdeal", round_id=rid, command_id="v-1", issued_at=1767261690000,
                       signature="0123456789abcdef" * 4),
        PlaceBet(bet_id="s1", player_id="p4", bet_type="chips", stake="50.00", seat=2, round_id="T1-000001",
                 command_id="s1"),
        PlayerAction(player_id="p1", action="BRING_IN", amount="0.50", round_id=rid, turn=1, command_id="a-1"),
        PlayerAction(player_id="p2", action="RAISE", amount="2.00", round_id="T1-000001", turn=3, command_id="a.2"),
        PlayerAction(player_id="p3", action="CALL", reserve=True, round_id=rid, command_id="a-3"),
        PlayerAction(player_id="p4", action="ALL_IN"),
        DealerConfirm(step="SHUFFLE", round_id=rid, command_id="station-2"), DealerConfirm(step="WASH"),
        CardExposed(position="P3.7", round_id=rid, command_id="station-3"),
    ]
    c.actions = [json.loads(ACTION_ADAPTER.dump_json(a)) for a in actions]
    events = actions + [
        OpenRound(round_id="T1-000001", at=5, betting_closes_at=15_005, draw="0f" * 32),
        ScanRead(reader="SC1", code="AS", seq=4, at=9), ScanRead(reader="SC1", code="01G", at=9),
        ReadFailed(reader="SC1", reason="corrupt_frame", detail="bad CRC", at=10),
        LinkDown(link="scanner:SC1", reason="heartbeat timeout"), LinkUp(link="broker"), DecisionTimeout(at=3),
        ActionTimeout(turn=3, at=4),
        ResultDelivered(round_id="T1-000001", outbox_id=12),  # a journal older than acknowledgements
        ResultDelivered(round_id="T1-000001", idempotency_key="T1:T1-000001", outbox_id=12),
    ]
    c.events = [json.loads(EVENT_ADAPTER.dump_json(e)) for e in events]
    effects: list[Any] = []
    from tools.games import KITS

    for game in list(KITS):  # every registered game's rounds
        effects += _play_round(game, 1) + _play_round(game, 2, link_cut=True) + _play_round(game, 3, void=True)
    by_model: dict[str, list[dict[str, Any]]] = {"round_result": [], "player_message": [], "station_prompt": [],
                                                 "round_event": []}
    names = {RoundResult: "round_result", PlayerMessage: "player_message", StationPrompt: "station_prompt",
             RoundEvent: "round_event"}
    for eff in effects:
        name = names.get(type(eff))
        if name is not None:
            by_model[name].append(json.loads(eff.model_dump_json()))
    c.messages = {k: _dedupe(v)[:60] for k, v in by_model.items()}
    c.configs = _config_seeds()
    keys: set[str] = set()
    strings: set[str] = set()
    for doc in c.scanner + c.actions + c.events + c.configs + [m for ms in c.messages.values() for m in ms]:
        _collect(doc, keys, strings)
    c.keys = tuple(sorted(keys | {"extra", "", "__proto__", "type ", "Type"}))
    c.strings = tuple(sorted(strings))
    _CORPUS = c
    return c


def _dedupe(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for d in docs:
        seen.setdefault(json.dumps(d, sort_keys=True), d)
    return list(seen.values())


def _config_seeds() -> list[dict[str, Any]]:
    teen = {"id": "T1", "game": "teen-patti", "currency": "EUR", "minor_unit": "0.01", "rounding": "DOWN",
            "betting_seconds": 15.0, "pause_seconds": 3.0, "auto_rounds": True, "alert_after": 3,
            "limits": {"player_a": {"min": "1", "max": "500"}, "tie": {"min": "0.50", "max": "50"}},
            "options": {"tie_ratio": "50", "main_ratio": "0.95", "deal_order": "ALTERNATE"},
            "scanner": {"kind": "serial", "port": "/dev/ttyUSB0", "reader_id": "SC1", "baudrate": 115200,
                        "heartbeat_timeout": 5.0}}
    seven = {"id": "T2", "game": "sevenluck", "currency": "USD", "minor_unit": "1", "rounding": "HALF_UP",
             "decision_seconds": 15.0,
             "options": {"hand_mode": "SEATED", "seats": 7, "decision_timeout_action": "FOLD",
                         "pair_plus": {"straight_flush": "40", "three_of_a_kind": "30", "straight": "6",
                                       "flush": "4", "pair": "1"}},
             "scanner": {"kind": "mqtt", "reader_id": "GW-2", "heartbeat_timeout": 2.5}}
    service = {"node_id": "studio-host-1", "journal_path": "dealer-journal.sqlite", "fsync": True,
               "metrics_enabled": False, "metrics_addr": "127.0.0.1", "metrics_port": 0, "log_level": "info"}
    mqtt = {"url": "mqtts://broker.studio:8883", "client_id": "dealer-backend", "username": "dealer",
            "password_file": "/run/secrets/mqtt", "keepalive": 10, "ca_file": "/etc/ssl/ca.pem"}
    return [
        {"service": service, "mqtt": mqtt, "tables": [teen, seven]},
        {"tables": [teen]},
        {"service": {"journal_path": "j.sqlite"}, "tables": [seven]},
        {"mqtt": {"url": "mqtt://127.0.0.1:1883"}},
        {},
    ]


# --- targets ----------------------------------------------------------------------------------


class Target:
    """One parser under test. ``check`` returns True (accepted) or False (refused with a reason,
    checked here), raises :class:`Violation` for a broken property, or lets a documented
    exception (``allowed``) escape, whose message ``rejection`` then checks."""

    name = ""
    allowed: tuple[type[BaseException], ...] = ()

    def setup(self, seed: int) -> None:
        self.corpus = corpus()
        self.state_rng = random.Random(f"{seed}:{self.name}:state")

    def close(self) -> None:
        pass

    def generate(self, rng: random.Random) -> Any:
        raise NotImplementedError

    def from_bytes(self, data: bytes) -> Any:
        """The input of the coverage-guided engine: raw bytes shaped for this target."""
        return data

    def to_bytes(self, inp: Any) -> bytes:
        """A generated input as bytes (seeds for the coverage-guided engine)."""
        return inp if isinstance(inp, bytes) else repr(inp).encode()

    def check(self, inp: Any) -> bool:
        raise NotImplementedError

    def rejection(self, exc: BaseException) -> None:
        if not str(exc).strip():
            raise Violation(f"{type(exc).__name__} without a message")


def _need(cond: bool, what: str, key: str | None = None) -> None:
    if not cond:
        raise Violation(what, key)


class _JsonTarget(Target):
    """A pydantic model or adapter parsing JSON bytes: refusals are ValidationError only."""

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from pydantic import ValidationError

        self.allowed = self.validation_error = (ValidationError,)
        self.seeds = self.own_seeds()
        self.all_seeds = self.corpus.json_seeds()

    def own_seeds(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def generate(self, rng: random.Random) -> bytes:
        r = rng.random()
        if r < 0.10:
            doc: Any = rng.choice(self.seeds)
        elif r < 0.80:
            doc = mutate_tree(rng.choice(self.seeds), rng, self.corpus.keys, self.corpus.strings)
        elif r < 0.85:
            doc = interesting(rng, self.corpus.strings)
        else:
            data = encode_text(dump_json(rng.choice(self.seeds), ascii=rng.random() < 0.5))
            return mutate_bytes(data, rng, self.all_seeds)
        return encode_text(dump_json(doc, ascii=rng.random() < 0.7))[:_MAX_INPUT]

    def parse(self, data: bytes) -> Any:
        raise NotImplementedError

    def dump(self, obj: Any) -> bytes:
        return obj.model_dump_json().encode()

    def check(self, inp: bytes) -> bool:
        obj = self.parse(inp)
        again = self.dump(obj)
        try:
            self.parse(again)
        except self.allowed as exc:
            raise Violation(f"an accepted message does not re-validate from its own JSON: {exc}") from None
        return True

    def rejection(self, exc: BaseException) -> None:
        super().rejection(exc)
        errors = exc.errors()  # type: ignore[attr-defined]
        _need(bool(errors) and all(e.get("msg") for e in errors), "ValidationError with an error without a message")


class FrameDecodeTarget(Target):
    name = "frame_decode"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from drivers import frames

        self.f = frames
        self.allowed = (frames.FrameError,)

    def generate(self, rng: random.Random) -> bytes:
        r = rng.random()
        if r < 0.15:
            line = rng.choice(self.corpus.frame_lines)
            return line if rng.random() < 0.7 else line[:-2] + rng.choice((b"\n", b"", b"\r", b"\n\r"))
        if r < 0.60:
            return self.structured(rng)
        line = mutate_bytes(rng.choice(self.corpus.frame_lines), rng, self.corpus.frame_lines)
        return self.fix_crc(line) if rng.random() < 0.5 else line

    def structured(self, rng: random.Random) -> bytes:
        """Fields broken one at a time, behind a correct CRC (85%) so the field checks see them."""
        statuses = [s.value for s in self.f.Status]
        status = rng.choice(statuses) if rng.random() < 0.85 else rng.choice(("ok", "", "OKAY", "HB ", "NO READ",
                                                                                _unicode_text(rng, 2)))
        reader = (rng.choice(("SC1", "GW-07", "0123456789ABCDEF")) if rng.random() < 0.6 else
                  rng.choice(("", "sc1", "A" * 17, "SC 1", "SC_1", "-", "SC1\x00", _unicode_text(rng, 3),
                              "".join(rng.choice("ABCZ019-") for _ in range(rng.randrange(1, 20))))))
        seq = (str(rng.randrange(2**32)) if rng.random() < 0.6 else
               rng.choice(("0", "00", "01", "-1", "4294967295", "4294967296", "99999999999", "", "1e3", " 1", "+1",
                           "0x1", "\u0661", "9" * 40)))
        if status == "BOOT" and rng.random() < 0.8:
            seq = "0"
        good = {"OK": ["AS", "TD", "01G", "11JD", "10"], "NOREAD": [""], "MISREAD": ["", "?", "AB?C"],
                "FAULT": sorted(self.f.FAULT_CODES), "HB": [""], "BOOT": ["", "1.2.3", "a-b.c"]}
        payload = (rng.choice(good.get(status, [""])) if rng.random() < 0.6 else
                   rng.choice(("", "as", "A", "ASDFG", "?" * 9, "JAMMED", "x" * 17, "A,B", "A*B", "A$B",
                               _unicode_text(rng, 2))))
        fields = [reader, seq, status, payload]
        if rng.random() < 0.1:
            if rng.random() < 0.5:
                fields.insert(rng.randrange(5), rng.choice(("", "X", "MAC=00")))
            else:
                del fields[rng.randrange(4)]
        body = encode_text(",".join(fields))
        if rng.random() < 0.25 and hasattr(self.f, "compute_mac"):  # a signature trailer ';boot;mac'
            boot = rng.choice(("0", "1", "7", "4294967295", "4294967296", "01", "", "-1", "x", "9" * 30))
            try:
                good = self.f.compute_mac(KEY, body, int(boot))
            except ValueError:
                good = "0" * 64
            mac = rng.choice((good, good, good.upper(), good[:-1], good + "0", "", "g" * 64,
                              "".join(rng.choice("0123456789abcdef") for _ in range(64))))
            parts = [boot, mac] if rng.random() < 0.9 else rng.choice(([boot], [mac], [boot, mac, "x"]))
            body += encode_text(";" + ";".join(parts))
        if rng.random() < 0.85:
            crc = f"{self.f.crc16(body):04X}".encode()
        else:
            crc = rng.choice((b"", b"0", b"ABC", b"abcd", b"12345", b"GGGG", b"00 0", f"{rng.randrange(65536):04X}".encode()))
        term = rng.choice((b"\r\n", b"\r\n", b"\r\n", b"\n", b"", b"\r", b"\n\r", b"\r\n\r\n"))
        return b"$" + body + b"*" + crc + term

    def fix_crc(self, line: bytes) -> bytes:
        start, star = line.find(b"$"), line.rfind(b"*")
        if start < 0 or star < start or len(line) < star + 5:
            return line
        return line[: star + 1] + f"{self.f.crc16(line[start + 1 : star]):04X}".encode() + line[star + 5 :]

    def check(self, inp: bytes) -> bool:
        frame = self.f.decode_frame(inp)
        body = inp[:-2] if inp.endswith(b"\r\n") else inp[:-1] if inp.endswith(b"\n") else inp
        try:
            again = self.f.encode_frame(frame)
        except Exception as exc:  # noqa: BLE001 - whatever stops the re-encoding is the finding
            raise Violation(f"a decoded frame does not re-encode: {type(exc).__name__}: {exc}") from None
        _need(again == body + b"\r\n", f"a decoded frame re-encodes differently: {again!r}")
        return True

    def rejection(self, exc: BaseException) -> None:
        super().rejection(exc)
        reason, raw = getattr(exc, "reason", None), getattr(exc, "raw", None)
        _need(isinstance(reason, str) and bool(reason), f"FrameError without a reason category: {reason!r}")
        _need(isinstance(raw, bytes) and len(raw) <= self.f.MAX_FRAME_LEN,
              f"FrameError.raw is not at most one frame of bytes: {raw!r}")


class FrameStreamTarget(FrameDecodeTarget):
    """``FrameDecoder.feed``: never raises; the output must not depend on the chunking."""

    name = "frame_stream"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        self.allowed = ()

    def generate(self, rng: random.Random) -> tuple[bytes, tuple[int, ...]]:
        pieces = []
        for _ in range(rng.randrange(1, 12)):
            r = rng.random()
            if r < 0.35:
                pieces.append(rng.choice(self.corpus.frame_lines))
            elif r < 0.60:
                pieces.append(super().generate(rng))
            elif r < 0.70:
                pieces.append(rng.randbytes(rng.randrange(1, 40)))
            elif r < 0.80:
                line = rng.choice(self.corpus.frame_lines)
                pieces.append(line[: rng.randrange(len(line))])
            elif r < 0.87:
                pieces.append(b"$" + bytes(rng.randrange(0x20, 0x7F) for _ in range(rng.randrange(50, 200))))
            elif r < 0.94:
                pieces.append(b"$" * rng.randrange(1, 5))
            else:
                pieces.append(rng.choice((b"\n", b"\r\n", b"\n\n", b"*", b"\r")))
        stream = b"".join(pieces)
        if len(stream) < 300 and rng.random() < 0.1:
            return stream, tuple(range(1, len(stream)))
        cuts = sorted(rng.randrange(len(stream) + 1) for _ in range(rng.randrange(0, 9)))
        return stream, tuple(cuts)

    def from_bytes(self, data: bytes) -> tuple[bytes, tuple[int, ...]]:
        if not data:
            return b"", ()
        rng = random.Random(data[0])
        stream = data[1:]
        return stream, tuple(sorted(rng.randrange(len(stream) + 1) for _ in range(data[0] % 8)))

    def to_bytes(self, inp: Any) -> bytes:
        return bytes([len(inp[1]) % 8]) + inp[0]

    @staticmethod
    def _norm(items: list[Any]) -> list[tuple[Any, ...]]:
        return [("frame", x) if not isinstance(x, Exception) else ("error", str(x), getattr(x, "reason", None),
                                                                    getattr(x, "raw", None)) for x in items]

    def check(self, inp: tuple[bytes, tuple[int, ...]]) -> bool:
        stream, cuts = inp
        whole = self.f.FrameDecoder()
        out = whole.feed(stream)
        chunked = self.f.FrameDecoder()
        out2: list[Any] = []
        prev = 0
        for cut in (*cuts, len(stream)):
            out2 += chunked.feed(stream[prev:cut])
            prev = cut
        _need(self._norm(out) == self._norm(out2), "the decoded output depends on how the stream was chunked")
        _need(whole.garbage_bytes == chunked.garbage_bytes, "garbage_bytes depends on the chunking")
        errors = 0
        for item in out:
            if isinstance(item, self.f.FrameError):
                errors += 1
                super().rejection(item)
            elif isinstance(item, self.f.Frame):
                _need(self.f.decode_frame(self.f.encode_frame(item)) == item, f"frame {item!r} does not round-trip")
            else:
                raise Violation(f"feed() returned a {type(item).__name__}")
        return errors == 0


#: A Bee-Tek stream input: 4 s of a 9600-baud line, four times what one read of the link returns.
_BEETEK_MAX = 4096


class BeeTekStreamTarget(Target):
    """``BeeTekCodec.feed`` (a Bee-Tek shoe's ASCII elements): never raises; the output does not
    depend on the chunking; a card read is one of the 52 codes; every CORRUPT input says why;
    the decoder holds at most one element whatever arrives (no delimiter, no end)."""

    name = "beetek_stream"
    _TAGS = ("Game", "Manual Burn Cards", "GameAlarm", "game", "", "Manual Burn", "Game ]")
    _BODIES = ("Card:4S", "Card:10H", "Card:TD", "Card:AC", "Game", "Alarm:E3 Card Not Read", "Alarm:", "W0x01",
               "W0xFFFF", "W0x", "Card:1S", "Card:4s", "Card:", "Card:10", "Card:KX", "Hello", "")

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from drivers.codecs import Notice, beetek
        from drivers.scan import ScanInput

        self.b, self.notice, self.scan_input = beetek, Notice, ScanInput
        self.seeds = [f" [{t}]<{body}> ".encode() for t in self._TAGS[:3] for body in self._BODIES[:7]] + [b"<W0x01>"]

    def generate(self, rng: random.Random) -> tuple[bytes, tuple[int, ...]]:
        pieces = []
        for _ in range(rng.randrange(1, 14)):
            r = rng.random()
            if r < 0.40:
                pieces.append(rng.choice(self.seeds))
            elif r < 0.60:
                tag = rng.choice(self._TAGS) if rng.random() < 0.8 else _unicode_text(rng, 3)
                body = rng.choice(self._BODIES) if rng.random() < 0.8 else _unicode_text(rng, 4)
                pieces.append(encode_text((f"[{tag}]" if rng.random() < 0.85 else "") + f"<{body}>"))
            elif r < 0.75:
                pieces.append(mutate_bytes(rng.choice(self.seeds), rng, self.seeds))
            elif r < 0.85:
                pieces.append(rng.randbytes(rng.randrange(1, 60)))
            elif r < 0.92:
                pieces.append(rng.choice((b"[", b"<")) + bytes(rng.randrange(0x20, 0x7F) for _ in range(rng.randrange(20, 200))))
            else:
                pieces.append(rng.choice((b"[", b"]", b"<", b">", b"  ", b"\r\n", b"[[", b"<<>>")))
        stream = b"".join(pieces)[:_BEETEK_MAX]
        cuts = sorted(rng.randrange(len(stream) + 1) for _ in range(rng.randrange(0, 9)))
        return stream, tuple(cuts)

    from_bytes = FrameStreamTarget.from_bytes
    to_bytes = FrameStreamTarget.to_bytes

    @staticmethod
    def _norm(items: list[Any]) -> list[tuple[Any, ...]]:
        return [(type(i).__name__, getattr(i, "kind", None), getattr(i, "code", None), getattr(i, "burn", None),
                 getattr(i, "detail", None), getattr(i, "message", None), getattr(i, "raw", None)) for i in items]

    def check(self, inp: tuple[bytes, tuple[int, ...]]) -> bool:
        stream, cuts = inp[0][:_BEETEK_MAX], inp[1]
        whole = self.b.BeeTekCodec("SC1")
        out = whole.feed(stream, 1).items
        chunked = self.b.BeeTekCodec("SC1")
        out2: list[Any] = []
        prev = 0
        for cut in (*cuts, len(stream)):
            out2 += chunked.feed(stream[prev:cut], 1).items
            prev = cut
            _need(len(chunked.decoder._buf) <= max(self.b.MAX_TAG, self.b.MAX_BODY), "the decoder's buffer grew "
                  "beyond one element", key="unbounded buffer")
        _need(self._norm(out) == self._norm(out2), "the decoded output depends on how the stream was chunked")
        _need(whole.garbage_bytes == chunked.garbage_bytes, "garbage_bytes depends on the chunking")
        corrupt = 0
        for item in out:
            if isinstance(item, self.notice):
                _need(bool(item.kind) and bool(item.message.strip()), "a notice without a kind or message")
                _need(len(item.raw) <= self.b.MAX_ELEMENT, f"a notice carries more than one element: {item.raw!r}")
            elif isinstance(item, self.scan_input):
                if item.kind.value == "OK":
                    _need(item.code in self.b.CARDS, f"a card read of {item.code!r}, not one of the 52 codes")
                else:
                    _need(bool(item.detail.strip()), f"a {item.kind.value} input without a detail")
                    corrupt += item.kind.value == "CORRUPT"
            else:
                raise Violation(f"feed() returned a {type(item).__name__}")
        return corrupt == 0


_SESSION_STATE = ("last_seq", "boot", "last_seen_ns", "last_heartbeat_ns", "lost", "repeats", "restarts", "late",
                  "boots", "firmware")


class ReaderSessionTarget(Target):
    """``ReaderSession.accept`` over a stream of valid frames with gaps, repeats, restarts and
    wraps; half of the sessions authenticate (HMAC), fed genuine, forged, unsigned and
    replayed frames. A FORGED input must come alone, with a reason, and change nothing else."""

    name = "reader_session"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from drivers import frames
        from drivers.scan import ScanKind

        self.f, self.kinds = frames, ScanKind
        self.session = frames.ReaderSession("SC1")
        self.allowed = (ValueError,)  # only for a frame of another reader
        self.ns = 0
        self.signing = hasattr(frames, "FrameAuthenticator")
        self.boot = 0  # the simulated reader's boot counter

    def generate(self, rng: random.Random) -> Any:
        f = self.f
        if rng.random() < 1 / 256:
            auth = rng.choice((None, False, True)) if self.signing else None
            return ("reset", auth)
        status = rng.choices(list(f.Status), weights=(50, 6, 6, 4, 25, 3))[0]
        last = self.session.last_seq if self.session.last_seq is not None else rng.randrange(2**32)
        r = rng.random()
        seq = ((last + 1) if r < 0.6 else last if r < 0.72 else last + rng.randrange(2, 5) if r < 0.82 else
               rng.choice((0, 1, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 2, 2**32 - 1)) if r < 0.9 else
               last - rng.randrange(1, 5) if r < 0.95 else rng.randrange(2**32)) % f.SEQ_MOD
        payload = {"OK": rng.choice(("AS", "KD", "01G")), "FAULT": "JAM", "MISREAD": "?",
                   "BOOT": "1.0"}.get(status.value, "")
        if status is f.Status.BOOT:
            seq = 0
            if rng.random() < 0.9:
                self.boot += 1
        reader = "SC1" if rng.random() < 0.97 else rng.choice(("SC2", "X"))
        frame = f.Frame(reader, seq, status, payload)
        if self.signing and rng.random() < 0.7:
            r = rng.random()
            boot = (self.boot if r < 0.8 else self.boot - 1 if r < 0.88 else self.boot + 1 if r < 0.96
                    else rng.choice((0, 2**32 - 1))) % f.SEQ_MOD
            frame = frame.sign(KEY if rng.random() < 0.9 else OTHER_KEY, boot)
        return frame

    def from_bytes(self, data: bytes) -> Any:
        return ("stream", data)

    def to_bytes(self, inp: Any) -> bytes:
        return self.f.encode_frame(inp) if isinstance(inp, self.f.Frame) else b""

    def _session(self, reader: str, auth: bool | None) -> Any:
        if auth is None:
            return self.f.ReaderSession(reader)
        return self.f.ReaderSession(reader, self.f.FrameAuthenticator([KEY], require=auth))

    def check(self, inp: Any) -> bool:
        if isinstance(inp, tuple) and inp[0] == "reset":
            self.session = self._session("SC1", inp[1])
            return True
        if isinstance(inp, tuple):  # coverage-guided: a fresh session fed the frames of one byte stream
            frames = [x for x in self.f.FrameDecoder().feed(inp[1]) if isinstance(x, self.f.Frame)]
            if not frames:
                return False
            self.session = self._session(frames[0].reader, (None, False, True)[len(inp[1]) % 3] if self.signing else None)
            ok = True
            for frame in frames:
                if frame.reader == self.session.reader:
                    ok = self._one(frame) and ok
            return ok
        return self._one(inp)

    def _one(self, frame: Any) -> bool:
        self.ns += 1_000_000
        foreign = frame.reader != self.session.reader
        s = self.session
        before = tuple(getattr(s, a, None) for a in _SESSION_STATE)
        forged_before = getattr(s, "forged", 0)
        try:
            out = s.accept(frame, self.ns)
        except ValueError as exc:
            _need(foreign, f"accept() raised ValueError for its own reader: {exc}")
            raise
        _need(not foreign, "accept() took a frame of another reader")
        bad = False
        kinds = self.kinds
        for inp in out:
            _need(inp.reader == s.reader, f"input of reader {inp.reader!r}")
            _need(inp.seq is None or 0 <= inp.seq < self.f.SEQ_MOD, f"input seq {inp.seq} out of range")
            if inp.kind == kinds.OK:
                _need(inp.code == frame.payload, f"OK input with code {inp.code!r} for payload {frame.payload!r}")
            elif inp.kind in (kinds.CORRUPT, kinds.LOST):
                _need(bool(inp.detail), f"{inp.kind} input without a detail", key=f"{inp.kind} without a detail")
                bad = bad or inp.kind == kinds.CORRUPT
            elif inp.kind == getattr(kinds, "FORGED", None):
                bad = True
                _need(len(out) == 1, "a FORGED input came with other inputs")
                _need(bool(inp.detail) and bool(getattr(inp, "reason", "x")), "a FORGED input without a reason",
                      key="FORGED without a reason")
                _need(tuple(getattr(s, a, None) for a in _SESSION_STATE) == before,
                      "a forged frame changed the session", key="a forged frame changed the session")
                _need(getattr(s, "forged", 1) == forged_before + 1, "a forged frame was not counted")
        if s.auth is not None if hasattr(s, "auth") else False:
            genuine = frame.mac is not None and frame.mac == frame.sign(KEY, frame.boot).mac
            if not genuine and (frame.mac is not None or s.auth.require):
                _need(bool(out) and out[0].kind == kinds.FORGED, "a frame without a valid MAC was not FORGED",
                      key="invalid MAC accepted")
        _need(min(s.lost, s.repeats, s.restarts, s.late, s.boots) >= 0, "a negative session counter")
        _need(s.last_seq is None or 0 <= s.last_seq < self.f.SEQ_MOD, f"last_seq {s.last_seq} out of range",
              key="last_seq out of range")
        return not bad


class ScannerJsonTarget(_JsonTarget):
    name = "scanner_json"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from drivers.frames import FrameError
        from drivers.scanner_json import ScannerMessage

        self.model, self.frame_error = ScannerMessage, FrameError

    def own_seeds(self) -> list[dict[str, Any]]:
        return self.corpus.scanner

    def parse(self, data: bytes) -> Any:
        return self.model.model_validate_json(data)

    def check(self, inp: bytes) -> bool:
        super().check(inp)
        try:
            self.parse(inp).frame()
        except self.frame_error as exc:  # schema-valid, but not a valid frame: refused the same way
            Target.rejection(self, exc)
            return False
        return True


class ScannerIngestTarget(ScannerJsonTarget):
    """``MqttScannerIngest.handle``: never raises; a bad message is reported once, with a reason."""

    name = "scanner_ingest"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from dealer.edge import topics
        from drivers.scanner_json import MqttScannerIngest

        self.topics = topics
        self.allowed = ()
        self.bad: list[tuple[str, str]] = []
        self.inputs: list[Any] = []
        self.links: list[Any] = []
        from drivers import frames

        self.frames = frames
        extra: dict[str, Any] = {}
        if hasattr(frames, "FrameAuthenticator"):  # SC2 signs its frames (HMAC); SC1 does not
            extra["auth"] = {"SC2": frames.FrameAuthenticator([KEY])}
        self.ingest = MqttScannerIngest({"SC1": "T1", "SC2": "T2"}, on_input=lambda t, i: self.inputs.append(i),
                                        on_link=lambda t, s: self.links.append(s),
                                        on_bad=lambda k, r: self.bad.append((k, r)), **extra)
        self.signing = "auth" in extra
        self.seq = {"SC1": 0, "SC2": 0}
        self.boot = {"SC1": 0, "SC2": 0}

    def generate(self, rng: random.Random) -> tuple[str, bytes]:
        r = rng.random()
        table = rng.choice(("T1", "T2"))
        topic = self.topics.scanner(table)
        if r < 0.05:
            topic = rng.choice(("", "studio/v1/tables/T3/scanner", self.topics.scanner("T1") + "/x", "#",
                                "studio/v1/tables//scanner", _unicode_text(rng)))
        if r < 0.45:  # a live reader: sequence numbers move on, so the sessions see real traffic
            reader = "SC1" if table == "T1" else "SC2"
            if rng.random() < 0.03:
                reader = rng.choice(("SC1", "SC2", "SC9"))
            self.seq[reader] = self.seq.get(reader, 0) + rng.choice((1, 1, 1, 1, 0, 2, 5))
            status = rng.choices(("OK", "HB", "NOREAD", "BOOT"), weights=(60, 30, 5, 2))[0]
            if status == "BOOT":
                self.boot[reader] = self.boot.get(reader, 0) + 1
            doc = {"reader": reader, "seq": 0 if status == "BOOT" else self.seq[reader] % 2**32, "status": status,
                   "payload": rng.choice(("AS", "KD", "01G")) if status == "OK" else ""}
            if self.signing and rng.random() < 0.6:
                frame = self.frames.Frame(doc["reader"], doc["seq"], doc["status"], doc["payload"])
                boot = self.boot.get(reader, 0) + rng.choice((0, 0, 0, 0, 0, -1, 1))
                signed = frame.sign(KEY if rng.random() < 0.9 else OTHER_KEY, boot % 2**32)
                doc |= {"boot": signed.boot, "mac": signed.mac}
            if rng.random() < 0.3:
                doc = mutate_tree(doc, rng, self.corpus.keys, self.corpus.strings)
            return topic, encode_text(dump_json(doc))[:_MAX_INPUT]
        return topic, super().generate(rng)

    def from_bytes(self, data: bytes) -> tuple[str, bytes]:
        return self.topics.scanner("T1" if len(data) % 2 else "T2"), data

    def to_bytes(self, inp: Any) -> bytes:
        return inp[1]

    def check(self, inp: tuple[str, bytes]) -> bool:
        topic, payload = inp
        del self.bad[:], self.inputs[:], self.links[:]
        self.ingest.handle(topic, payload)
        try:
            self.model.model_validate_json(payload).frame()
            valid = True
        except (*self.validation_error, self.frame_error):
            valid = False
        _need(len(self.bad) <= 1, f"{len(self.bad)} bad-message reports for one message")
        if self.bad:
            kind, reason = self.bad[0]
            _need(bool(kind) and bool(reason.strip()), "a bad-message report without a reason")
            _need(not self.inputs and not self.links, "a refused message still produced scan inputs")
            return False
        _need(valid, "an invalid scanner message was not reported as bad")
        forged = [i for i in self.inputs if i.kind == "FORGED"]
        if forged:
            _need(len(self.inputs) == 1 and bool(forged[0].detail) and bool(getattr(forged[0], "reason", "x")),
                  "a FORGED scanner input without a reason, or with other inputs", key="FORGED input")
            _need(not self.links, "a forged message counted as a sign of life", key="forged sign of life")
            return False
        return True


class ActionsTarget(_JsonTarget):
    name = "actions"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from dealer.core.events import ACTION_ADAPTER

        self.adapter = ACTION_ADAPTER

    def own_seeds(self) -> list[dict[str, Any]]:
        return self.corpus.actions

    def parse(self, data: bytes) -> Any:
        return self.adapter.validate_json(data)

    def dump(self, obj: Any) -> bytes:
        return self.adapter.dump_json(obj)


class EventsTarget(ActionsTarget):
    name = "events"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from dealer.core.events import EVENT_ADAPTER

        self.adapter = EVENT_ADAPTER

    def own_seeds(self) -> list[dict[str, Any]]:
        return self.corpus.events


class _MessageTarget(_JsonTarget):
    model_name = ""

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from dealer.core import messages

        self.model = getattr(messages, self.model_name)

    def own_seeds(self) -> list[dict[str, Any]]:
        return self.corpus.messages[self.name]

    def parse(self, data: bytes) -> Any:
        return self.model.model_validate_json(data)


class RoundResultTarget(_MessageTarget):
    name, model_name = "round_result", "RoundResult"


class PlayerMessageTarget(_MessageTarget):
    name, model_name = "player_message", "PlayerMessage"


class StationPromptTarget(_MessageTarget):
    name, model_name = "station_prompt", "StationPrompt"


class RoundEventTarget(_MessageTarget):
    name, model_name = "round_event", "RoundEvent"


def _table_state(table: Any) -> tuple[Any, ...]:
    cur = table.current
    rnd = None if cur is None else (id(cur), cur.round_id, cur.phase, tuple(cur.bets), tuple(cur.cards.items()),
                                    tuple(cur.decisions), cur.next_index, cur.reject_count, cur.result is None)
    return rnd, tuple(table.undelivered), tuple(sorted(table.links_down.items())), table.last_seq


class ServiceActionsTarget(_JsonTarget):
    """``Inputs.on_command`` (``Service._on_action`` was its old name) with a real Service (LocalBus,
    journal in a temp folder), fed on every command topic: it may not raise and changes no
    table directly. What ``dealer.edge.roles`` and the schema refuse (another role's command, a
    command without its ``command_id``, ``round_id`` or ``turn``, an unsigned supervisor's
    command, a malformed one, an unknown table) is refused once with a reason and answered
    with one published ``rejected`` event; what they accept is queued unchanged, reads back
    from its own JSON (as the journal will), and the core, command-id check included (a
    repeat answered again, a reused id refused), handles it without raising (a refusal
    carries a reason). Inputs are addressed like a real client's: a fresh ``command_id``,
    the table's round, its role's topic, and sometimes an exact repeat of a recent command."""

    name = "service_actions"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from dealer.edge import ingress, roles, topics
        from dealer.edge.config import load_settings
        from dealer.core.events import (
            ACTION_ADAPTER,
            EVENT_ADAPTER,
            CloseBetting,
            OpenRound,
            PlaceBet,
            ScanRead,
        )
        from dealer.games.matgo import AI_PLAYER
        from dealer.edge.journal import Batch
        from dealer.core.messages import RoundEvent
        from dealer.core.round import ACTIVE
        from dealer.edge.service import Service
        from dealer.core.table import Table
        from drivers.bus import LocalBus

        self.allowed = ()
        self.topics, self.adapter, self.RoundEvent, self.Table, self.ACTIVE = topics, ACTION_ADAPTER, RoundEvent, Table, ACTIVE
        self.roles, self.event_adapter, self.Batch, self.ai_player = roles, EVENT_ADAPTER, Batch, AI_PLAYER
        self.max_bytes, self.too_deep = ingress.MAX_COMMAND_BYTES, ingress.too_deep
        self.ev = {"open": OpenRound, "bet": PlaceBet, "close": CloseBetting, "scan": ScanRead}
        self._tmp = tempfile.TemporaryDirectory(prefix="dealer-fuzz-")
        settings = load_settings(
            service={"journal_path": Path(self._tmp.name) / "journal.sqlite", "metrics_enabled": False, "fsync": False},
            tables=[{"id": "T1", "game": "teen-patti", "auto_rounds": False,
                     "limits": {"player_a": {"min": "1", "max": "1000"}},
                     "scanner": {"kind": "mqtt", "reader_id": "SC1"}},
                    {"id": "T2", "game": "sevenluck", "auto_rounds": False,
                     "scanner": {"kind": "mqtt", "reader_id": "SC2"}}])
        self.loop = asyncio.new_event_loop()
        self.svc = Service(settings, bus=LocalBus(), broker_link=False)
        self.refusals: list[Any] = []
        self.published: list[tuple[str, Any]] = []
        self.core_error: BaseException | None = None
        self.svc.refusals.observers.append(self.refusals.append)  # every refusal, at the ingress or the commit loop
        self.svc.add_observer(lambda kind, msg: self.published.append((kind, msg)))
        self.since_reset, self.reset_every = 0, 0
        self.players = ("p1", "p2", "p3", "p4")
        self.recent: list[tuple[str, bytes]] = []  # commands sent lately, to send one again exactly
        self.recent_ids: list[str] = []  # and their ids, to use one again for another command
        self.service_seeds = self._action_seeds()
        own = {"T1": {"player_a", "tie", "pair_plus_a", "six_card_bonus"}, "T2": {"ante", "pair_plus"}}
        self.table_seeds = {tid: [d for d in self.service_seeds if d.get("bet_type", next(iter(types))) in types]
                            for tid, types in own.items()}

    def _action_seeds(self) -> list[dict[str, Any]]:
        seeds: list[dict[str, Any]] = list(self.corpus.actions)
        for p in self.players:
            for bet_type, seat in (("player_a", None), ("tie", None), ("pair_plus_a", None), ("six_card_bonus", None),
                                   ("ante", 1), ("ante", 4), ("pair_plus", 2), ("ante", None)):
                for stake in ("1", "10.00", "0.5", "1000", "2.505"):
                    seeds.append({"type": "place_bet", "bet_id": f"{p}-{bet_type}-{stake}", "player_id": p,
                                  "bet_type": bet_type, "stake": stake, "seat": seat})
            seeds += [{"type": "player_decision", "player_id": p, "action": a} for a in ("PLAY", "FOLD", "RAISE")]
        seeds += [{"type": "close_betting", "by": b} for b in ("dealer", "dealer", "timer", "supervisor")]
        seeds += [{"type": "dealer_confirm", "step": s} for s in ("SHUFFLE", "WASH")]
        seeds.append({"type": "card_exposed", "position": "P3.7"})
        seeds.append({"type": "supervisor_void", "supervisor": "sup", "reason": "misdeal"})
        # a supervisor's command as a pit-boss console signs it (no supervisor key is configured here)
        seeds.append({"type": "supervisor_void", "command_id": "c-1", "supervisor": "sup-ana", "table_id": "T1",
                      "round_id": "T1-000001", "issued_at": 1767261690000, "reason": "shoe jammed",
                      "signature": "0" * 64})
        return seeds

    def close(self) -> None:
        async def _stop() -> None:
            await asyncio.sleep(0)

        self.loop.run_until_complete(_stop())
        self.loop.close()
        self.svc.writer.shutdown(wait=True)
        self.svc.journal.close()
        self._tmp.cleanup()

    def own_seeds(self) -> list[dict[str, Any]]:
        return self.corpus.actions

    def _address(self, doc: dict[str, Any], tid: str, rng: random.Random) -> dict[str, Any]:
        """Name the command as a client does: a fresh id, the table's round, the turn; now and
        then an id used before (a reused id), another round, or nothing (refused)."""
        table = self.svc.tables.get(tid)
        cur = table.current if table is not None else None
        r = rng.random()
        if r < 0.85 or not self.recent_ids:
            doc["command_id"] = f"fz-{rng.getrandbits(48):012x}"
            self.recent_ids = (self.recent_ids + [doc["command_id"]])[-20:]
        elif r < 0.95:
            doc["command_id"] = rng.choice(self.recent_ids)
        else:
            doc.pop("command_id", None)
        r = rng.random()
        if r < 0.9 and cur is not None:
            doc["round_id"] = cur.round_id
        elif r < 0.95:
            doc["round_id"] = f"{tid}-00000{rng.randrange(10)}"
        else:
            doc.pop("round_id", None)
        if doc.get("type") == "player_action" and not doc.get("reserve") and rng.random() < 0.9:
            doc["turn"] = cur.turn if cur is not None and getattr(cur, "turn", None) else rng.randint(1, 5)
        return doc

    def _topic_for(self, doc: dict[str, Any], tid: str, rng: random.Random) -> str:
        """Mostly the topic of the command's role; sometimes another role's (refused)."""
        role = self.roles.SENDER.get(str(doc.get("type")), self.roles.Role.PLAYER_PLATFORM)
        if rng.random() < 0.1:
            role = rng.choice((self.roles.Role.PLAYER_PLATFORM, self.roles.Role.STATION, self.roles.Role.SUPERVISOR))
        return self.roles.command_topic(role, tid)

    def generate(self, rng: random.Random) -> tuple[str, bytes]:
        r = rng.random()
        tid = rng.choice(("T1", "T2"))
        topic = self.topics.table_topic(tid, rng.choice(("actions", "station", "supervisor")))
        if r < 0.05:
            topic = rng.choice(("", "studio/v1/tables/T3/actions", "studio/v1/tables/T3/station", "studio/v1/tables",
                                self.topics.actions("T1") + "/x", self.topics.scanner("T1"), self.topics.events("T2"),
                                "studio/v2/tables/T1/station", _unicode_text(rng)))
        elif r < 0.10 and self.recent:  # a command delivered again (QoS 1), or retried by its sender
            return rng.choice(self.recent)
        if r < 0.50:  # mostly what the table's phase expects, so valid commands get past the ingress and the core
            table = self.svc.tables.get(tid)
            phase = table.current.phase if table is not None and table.current is not None else None
            seeds = self.table_seeds.get(tid, self.service_seeds)
            if phase == "BETTING_OPEN" and rng.random() < 0.9:
                seeds = [d for d in seeds if d["type"] in ("place_bet", "close_betting")]
            elif phase == "DECISION" and rng.random() < 0.8:
                seeds = [d for d in seeds if d["type"] == "player_decision"]
            doc = dict(rng.choice(seeds if rng.random() < 0.8 else self.service_seeds))
            if "bet_id" in doc:
                doc["bet_id"] += f"-{rng.randrange(1000)}"
            doc = self._address(doc, tid, rng)
            if r >= 0.05:
                topic = self._topic_for(doc, tid, rng)
            if rng.random() < 0.3:
                doc = mutate_tree(doc, rng, self.corpus.keys, self.corpus.strings)
            inp = (topic, encode_text(dump_json(doc))[:_MAX_INPUT])
            self.recent = (self.recent + [inp])[-20:]
            return inp
        data = super().generate(rng)
        named = re.search(rb'"type" ?: ?"([a-z_]{1,32})"', data[:4096])
        if r >= 0.05 and named is not None and rng.random() < 0.7:  # a damaged command, mostly on its role's topic
            topic = self._topic_for({"type": named.group(1).decode()}, tid, rng)
        return topic, data

    def from_bytes(self, data: bytes) -> tuple[str, bytes]:
        leaf = ("actions", "station", "supervisor")[len(data) % 3]
        return self.topics.table_topic("T1" if len(data) % 2 else "T2", leaf), data

    def to_bytes(self, inp: Any) -> bytes:
        return inp[1]

    def check(self, inp: tuple[str, bytes]) -> bool:
        return self.loop.run_until_complete(self._check(inp))

    def _expected(self, topic: str, payload: bytes) -> Any | None:
        """The event the rules make of this command, or None when they refuse it: judged from
        ``dealer.edge.roles`` and the schema, not by the ingress under test."""
        where = self.roles.role_of_topic(topic)
        if where is None or where[0] not in self.svc.tables or len(payload) > self.max_bytes or self.too_deep(payload):
            return None
        tid, role = where
        try:
            ev = self.adapter.validate_python(json.loads(payload))
        except (ValueError, RecursionError, *self.validation_error):
            return None
        if ev.type not in self.roles.COMMANDS[role] or role is self.roles.Role.SUPERVISOR:
            return None  # another role's command; no supervisor key is configured here
        if not getattr(ev, "command_id", None) or not getattr(ev, "round_id", None):
            return None
        if ev.type == "player_action" and ev.turn is None and not ev.reserve:
            return None
        if getattr(ev, "player_id", None) == self.ai_player or (ev.type == "close_betting" and ev.by != "dealer"):
            return None
        player = getattr(ev, "player_id", None)
        if player is not None and ("." in player or self.roles.is_role_user(player)):
            return None  # unroutable on some brokers, or a broker role's user name (dealer/edge/ingress.py)
        if player in self.svc.tables[tid].rules.game.deck:
            return None  # a player id that spells a card of the game (dealer/edge/inputs.py)
        return ev

    def _apply(self, item: Any) -> Any:
        """The commit loop's handling of one queued item; an exception of the core is re-raised
        (the service would log it and answer "internal error")."""
        self.core_error = None
        step = self.svc.commit_loop.apply(item, self.Batch())
        if self.core_error is not None:
            raise self.core_error
        return step

    async def _check(self, inp: tuple[str, bytes]) -> bool:
        topic, payload = inp
        svc = self.svc
        self.since_reset += 1
        if self.since_reset > self.reset_every or any(
                t.current is None or t.current.phase not in self.ACTIVE for t in svc.tables.values()):
            self._reset()
        before = {tid: _table_state(t) for tid, t in svc.tables.items()}
        del self.refusals[:], self.published[:]
        svc.inputs.on_command(topic, payload)
        _need({tid: _table_state(t) for tid, t in svc.tables.items()} == before, "_on_command changed a table directly")
        queued = []
        while not svc.queue.items.empty():
            queued.append(svc.queue.items.get_nowait())
        commands = [i for i in queued if i.cmd is not None]
        expected = self._expected(topic, payload)
        if expected is None:
            _need(not commands, "a command the rules refuse was queued")
            _need(len(self.refusals) == 1 and bool(self.refusals[0].reason.strip()) and bool(self.refusals[0].kind),
                  "a refused command was not refused once with a reason")
            refusal = self.refusals[0]
            rejected = [m for k, m in self.published if isinstance(m, self.RoundEvent) and m.event == "rejected"]
            if refusal.table_id is None:
                _need(self.roles.role_of_topic(topic) is None or self.topics.table_of(topic) not in svc.tables,
                      "a command for a known table was refused as for no table")
                _need(not rejected, "a rejected event was published for an unknown table")
            else:
                _need(len(rejected) == 1 and bool(str(rejected[0].data.get("reason", "")).strip()),
                      "a refused command did not publish one rejected event with a reason")
            _need(all(i.cmd is None and refusal.security for i in queued), "a refusal queued something else than "
                  "its security event", key="refusal queued")
            for item in queued:  # the security event: journaled and alerted, changes no round
                step = self._apply(item)
                _need(step.accepted and step.journal, "a security event was not journaled")
                svc.releaser.release(item, step)
            await asyncio.sleep(0)
            return False
        _need(not self.refusals, f"a command the rules accept was refused: {self.refusals[:1]}",
              key="a command the rules accept was refused")
        _need(len(queued) == 1, f"a valid command queued {len(queued)} events")
        item = queued[0]
        _need(item.table_id == self.topics.table_of(topic) and item.event == expected.model_copy(update={"at": item.event.at}),
              "the queued event differs from the command")
        try:  # the journal keeps it as JSON and replays it from there
            again = self.event_adapter.validate_json(item.event.model_dump_json())
        except self.validation_error as exc:
            raise Violation(f"an accepted command does not read back from its own JSON: {exc}"[:_MSG_LIMIT],
                            key="accepted command does not read back") from None
        _need(again == item.event, "an accepted command reads back different from its own JSON")
        item.future = None
        del self.refusals[:]
        step = self._apply(item)
        if not step.accepted:
            rej = step.rejection
            _need((rej is not None and bool(rej.reason.strip()))
                  or (len(self.refusals) == 1 and bool(self.refusals[0].reason.strip())), "a refused command without a reason")
        svc.releaser.release(item, step)
        while not svc.queue.items.empty():  # a refusal in the commit loop (a reused id) may queue its security event
            extra = svc.queue.items.get_nowait()
            svc.releaser.release(extra, self._apply(extra))
        await asyncio.sleep(0)  # let the publishes of this step run
        return bool(step.accepted)

    def _reset(self) -> None:
        """Fresh tables in a random phase: betting open, betting closed, part dealt, deciding."""
        rng, svc = self.state_rng, self.svc
        self.since_reset, self.reset_every = 0, rng.randrange(10, 300)
        for tid in svc.configs:  # the service never runs here: the harness puts the tables in
            table = self.Table(svc.configs[tid].rules())
            svc.tables[tid] = table
            self._guard(table)
            self._drive(table, self.ev["open"](round_id=f"{tid}-000001", at=1))
            r = rng.random()
            if r < 0.6:
                continue
            game = table.rules.game
            deciding = game.name == "sevenluck" and r < 0.85
            if deciding:
                for k, p in enumerate(self.players[:3]):
                    self._drive(table, self.ev["bet"](bet_id=f"drv{k}", player_id=p, bet_type="ante", stake="10",
                                                      seat=k + 1, at=2))
            self._drive(table, self.ev["close"](at=3))
            assert table.current is not None
            plan = table.current.plan
            n = len(plan) if deciding else rng.randrange(len(plan))
            for i, code in enumerate(rng.sample(sorted(game.deck), len(plan))[:n]):
                self._drive(table, self.ev["scan"](reader="R", code=code, seq=i + 1, at=4 + i))

    def _guard(self, table: Any) -> None:
        """Remember an exception of ``table.handle``: the service's commit loop turns one into an
        "internal error" refusal, which would hide it from the fuzzer."""
        inner = table.handle

        def handle(ev: Any) -> Any:
            try:
                return inner(ev)
            except Exception as exc:
                self.core_error = exc
                raise

        table.handle = handle

    @staticmethod
    def _drive(table: Any, ev: Any) -> None:
        step = table.handle(ev)
        if not step.accepted:
            raise RuntimeError(f"fuzz harness: scenario event {ev.type} refused: {step.rejection}")


class ConfigTarget(Target):
    """``load_settings`` on TOML text: ConfigError with a message, nothing else; and a
    configuration it accepts must build the service's tables (``TableConfig.rules``)."""

    name = "config"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from dealer.edge.config import ConfigError, load_settings

        self.allowed = (ConfigError,)
        self.load = load_settings
        self._tmp = tempfile.TemporaryDirectory(prefix="dealer-fuzz-config-")
        self.path = Path(self._tmp.name) / "dealer.toml"
        self.seeds_text = [encode_text(dump_toml(d)) for d in self.corpus.configs]
        self.strings = self.corpus.strings + ("1979-05-27T07:32:00Z",)

    def close(self) -> None:
        self._tmp.cleanup()

    def generate(self, rng: random.Random) -> bytes:
        r = rng.random()
        if r < 0.08:
            return rng.choice(self.seeds_text)
        if r < 0.75:
            doc = mutate_tree(rng.choice(self.corpus.configs), rng, self.corpus.keys, self.strings)
            if rng.random() < 0.15:  # TOML-only values: dates, bare nan/inf, huge integers
                doc = mutate_tree(doc, rng, self.corpus.keys, ("1979-05-27T07:32:00Z",))
                slots: list[tuple[Any, Any]] = []
                _slots(doc, slots)
                if slots:
                    parent, key = rng.choice(slots)
                    parent[key] = Raw(rng.choice(("1979-05-27T07:32:00Z", "07:32:00", "1979-05-27", "nan", "inf",
                                                  "-inf", "+inf", "0x7FFFFFFF", "0o777", "0b101", "1_000",
                                                  "9" * 30, "1e400", "'literal'", "'''x'''", "[]", "{}")))
            return encode_text(dump_toml(doc))[:_MAX_INPUT]
        if r < 0.82:
            d = _deep(rng)
            return rng.choice((b"a = " + b"[" * d + b"]" * d, b"a = " + b"{b=" * d + b"1" + b"}" * d,
                               b"[" + b".".join([b"a"] * d) + b"]", rng.choice(self.seeds_text) + b"x = " + b"[" * d))
        return mutate_bytes(rng.choice(self.seeds_text), rng, self.seeds_text)

    def check(self, inp: bytes) -> bool:
        self.path.write_bytes(inp)
        settings = self.load(self.path)
        for table in settings.tables:
            try:
                table.rules()
            except Exception as exc:  # noqa: BLE001 - an accepted config whose rules() fail is the finding
                raise Violation(f"load_settings accepted table {table.id!r} whose rules() raise "
                                f"{type(exc).__name__}: {exc}", key=f"rules() raise {type(exc).__name__}") from None
            for name in ("betting_seconds", "decision_seconds"):  # both go through int(seconds * 1000)
                value = getattr(table, name)
                _need(math.isfinite(value), f"load_settings accepted {name} = {value!r}: the service computes "
                      f"int({name} * 1000), which raises OverflowError", key=f"non-finite {name} accepted")
        return True


_BASE_CLASSES: dict[str, type[Target]] = {cls.name: cls for cls in (
    FrameDecodeTarget, FrameStreamTarget, BeeTekStreamTarget, ReaderSessionTarget, ScannerJsonTarget, ScannerIngestTarget, ActionsTarget,
    EventsTarget, RoundResultTarget, PlayerMessageTarget, StationPromptTarget, RoundEventTarget,
    ServiceActionsTarget, ConfigTarget)}


def _target_classes() -> dict[str, type[Target]]:
    """Every target by name: this module's, then the peer games' (tools/fuzz_games.py and
    tools/fuzz_game_players.py, which build on this module and are imported when first needed)."""
    from tools.fuzz_game_players import GAME_CLASSES

    classes = {**_BASE_CLASSES, **GAME_CLASSES}
    assert tuple(classes) == TARGETS
    return classes


@contextlib.contextmanager
def open_target(name: str, seed: int = 0) -> Iterator[Target]:
    """A set-up target (``check`` one input, ``generate`` one) for tests and reproductions."""
    classes = _target_classes()
    if name not in classes:
        raise ValueError(f"unknown fuzz target {name!r} (known: {', '.join(TARGETS)})")
    target = classes[name]()
    target.setup(seed)
    try:
        with _quiet_logs():
            yield target
    finally:
        target.close()


def generate_input(name: str, seed: int, index: int) -> Any:
    """The ``index``-th generated input of a stateless target for ``seed`` (reproduction)."""
    with open_target(name, seed) as target:
        return target.generate(random.Random(f"{seed}:{name}:{index}"))


# --- running ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    result: str  # accepted, rejected or finding
    kind: str = ""
    exception: str = ""
    message: str = ""
    where: str = ""


_ROOT = str(Path(__file__).resolve().parent.parent) + os.sep
_SELF = os.path.abspath(__file__)


def _where(tb: Any) -> str:
    """The innermost frame of the project (dealer/, drivers/) that is not this module."""
    best = last = None
    while tb is not None:
        code = tb.tb_frame.f_code
        name = code.co_filename if os.path.isabs(code.co_filename) else os.path.abspath(code.co_filename)
        last = (name, tb.tb_lineno, code.co_name)
        if name.startswith(_ROOT) and name != _SELF and os.sep + ".venv" + os.sep not in name:
            best = last
        tb = tb.tb_next
    found = best or last
    if found is None:
        return ""
    name, line, func = found
    name = name.removeprefix(_ROOT)
    return f"{name}:{line} in {func}"


def run_one(target: Target, inp: Any) -> Outcome:
    """Classify one input: accepted, rejected (documented exception with a message), or a finding."""
    try:
        ok = target.check(inp)
        return Outcome("accepted" if ok else "rejected")
    except Violation as v:
        return Outcome("finding", "property", "", str(v)[:_MSG_LIMIT], v.key)
    except RecursionError as exc:  # before `allowed`: RecursionError is a RuntimeError, never documented
        return Outcome("finding", "exception", type(exc).__name__, str(exc)[:_MSG_LIMIT], _where(exc.__traceback__))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - classifying everything is the point
        if target.allowed and isinstance(exc, target.allowed):
            try:
                target.rejection(exc)
            except Violation as v:
                return Outcome("finding", "rejection", type(exc).__name__, str(v)[:_MSG_LIMIT],
                               f"{v.key} @ {_where(exc.__traceback__)}")
            return Outcome("rejected")
        return Outcome("finding", "exception", type(exc).__name__, str(exc)[:_MSG_LIMIT], _where(exc.__traceback__))


def _short_repr(inp: Any) -> str:
    text = repr(inp)
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 40] + f"...<{len(text)} chars>..." + text[-20:]


def _input_len(inp: Any) -> int:
    if isinstance(inp, (bytes, str)):
        return len(inp)
    if isinstance(inp, tuple) and inp and isinstance(inp[-1], (bytes, str)):
        return len(inp[-1])
    if isinstance(inp, tuple) and inp and isinstance(inp[0], bytes):
        return len(inp[0])
    return 0


class _Stats:
    def __init__(self, name: str, slow_s: float) -> None:
        self.name, self.slow_s = name, slow_s
        self.inputs = self.accepted = self.rejected = 0
        self.max_s = 0.0
        self.slowest: dict[str, Any] = {}
        self.seconds = 0.0
        self.findings: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add(self, index: int, inp: Any, outcome: Outcome, elapsed: float) -> None:
        self.inputs += 1
        if elapsed > self.max_s:
            self.max_s = elapsed
            self.slowest = {"index": index, "ms": round(elapsed * 1000, 3), "input_len": _input_len(inp),
                            "input": _short_repr(inp)[:120]}
        if outcome.result == "accepted":
            self.accepted += 1
        else:
            self.rejected += 1  # a finding is still an input the parser did not accept
        if outcome.result == "finding":
            self._finding(outcome.kind, outcome.exception, outcome.message, outcome.where, index, inp)
        if elapsed > self.slow_s:
            self._finding("slow", "", f"one call took {elapsed:.3f} s (limit {self.slow_s} s)", "", index, inp)

    def _finding(self, kind: str, exc: str, message: str, where: str, index: int, inp: Any) -> None:
        key = (kind, exc, where)
        f = self.findings.get(key)
        if f is None:
            f = self.findings[key] = {"target": self.name, "kind": kind, "exception": exc, "message": message,
                                      "where": where, "count": 0, "examples": []}
        f["count"] += 1
        if len(f["examples"]) < MAX_EXAMPLES:
            f["examples"].append({"index": index, "input": _short_repr(inp), "input_len": _input_len(inp)})

    def result(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs, "accepted": self.accepted, "rejected": self.rejected,
            "findings": sorted(self.findings.values(), key=lambda f: (f["kind"], f["exception"], f["where"], f["message"])),
            "max_ms": round(self.max_s * 1000, 3), "slowest": self.slowest, "seconds": round(self.seconds, 3),
            "inputs_per_s": round(self.inputs / self.seconds) if self.seconds > 0 else 0,
        }


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """The service logs every bad message; a million of them would drown the report."""
    import structlog

    saved = dict(structlog.get_config())
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    try:
        yield
    finally:
        structlog.configure(**saved)


def _split(inputs: int, names: list[str]) -> dict[str, int]:
    base, extra = divmod(inputs, len(names))
    return {n: base + (1 if i < extra else 0) for i, n in enumerate(names)}


def _check_targets(targets: list[str] | None) -> list[str]:
    names = list(dict.fromkeys(targets)) if targets else list(TARGETS)
    unknown = [t for t in names if t not in TARGETS]
    if unknown:
        raise ValueError(f"unknown fuzz target(s) {unknown} (known: {', '.join(TARGETS)})")
    return names


def _totals(per: dict[str, dict[str, Any]], seconds: float) -> dict[str, Any]:
    n = sum(r["inputs"] for r in per.values())
    return {"inputs": n, "accepted": sum(r["accepted"] for r in per.values()),
            "rejected": sum(r["rejected"] for r in per.values()),
            "findings": sum(len(r["findings"]) for r in per.values()),
            "finding_inputs": sum(f["count"] for r in per.values() for f in r["findings"]),
            "seconds": round(seconds, 3), "inputs_per_s": round(n / seconds) if seconds > 0 else 0}


def run_fuzz(inputs: int, seed: int, targets: list[str] | None = None, *, slow_s: float = SLOW_S,
             progress: bool | None = None) -> dict[str, Any]:
    """Fuzz ``targets`` (default: all) with ``inputs`` generated inputs in total, split evenly.

    Returns ``{"engine", "seed", "inputs", "targets": {name: {inputs, accepted, rejected,
    findings, max_ms, seconds, inputs_per_s}}, "totals": {...}}``; apart from the timings
    (and ``slow`` findings) the result is the same for the same seed.
    """
    names = _check_targets(targets)
    counts = _split(inputs, names)
    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=inputs, unit="in", file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
    per: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    try:
        for name in names:
            stats = _Stats(name, slow_s)
            rng = random.Random()
            with open_target(name, seed) as target:
                if bar is not None:
                    bar.set_description(name)
                t_start = time.perf_counter()
                for i in range(counts[name]):
                    rng.seed(f"{seed}:{name}:{i}")
                    try:
                        inp = target.generate(rng)
                    except Exception as exc:  # the generator itself: a bug here, not in the target
                        raise RuntimeError(f"fuzz generator of {name} failed at input {i}: {exc!r}") from exc
                    t0 = time.perf_counter()
                    outcome = run_one(target, inp)
                    stats.add(i, inp, outcome, time.perf_counter() - t0)
                    if bar is not None and i % 256 == 255:
                        bar.update(256)
                stats.seconds = time.perf_counter() - t_start
                if bar is not None:
                    bar.update(counts[name] % 256)
                reached = getattr(target, "reached", None)  # a game target: what its rounds went through
            per[name] = stats.result()
            if reached is not None:
                per[name]["reached"] = dict(sorted(reached.items()))
    finally:
        if bar is not None:
            bar.close()
    return {"engine": "generator", "seed": seed, "inputs": inputs, "slow_s": slow_s, "targets": per,
            "totals": _totals(per, time.perf_counter() - started),
            "python": ".".join(map(str, sys.version_info[:3]))}


# --- coverage-guided engine (atheris, optional) ----------------------------------------------

_STAT_FIELDS = 4  # inputs, accepted, rejected, max_ns


def atheris_available() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def run_atheris(inputs: int, seed: int, targets: list[str] | None = None, *, slow_s: float = SLOW_S,
                timeout_s: float | None = None) -> dict[str, Any]:
    """Coverage-guided: libFuzzer (atheris) drives each target for its share of ``inputs``
    runs, in a child process per target (libFuzzer exits the process when done), seeded
    with the generator's valid and mutated inputs. Findings are classified exactly as in
    :func:`run_fuzz`."""
    if not atheris_available():
        raise RuntimeError("atheris is not installed (pip install atheris); use the default generator engine")
    names = _check_targets(targets)
    counts = _split(inputs, names)
    per: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"dealer-atheris-{name}-") as tmp:
            work = Path(tmp)
            seeds = work / "corpus"
            seeds.mkdir()
            with open_target(name, seed) as target:
                rng = random.Random()
                for i in range(64):
                    rng.seed(f"{seed}:{name}:seed:{i}")
                    data = target.to_bytes(target.generate(rng))[:4096]
                    (seeds / f"seed-{i:03d}").write_bytes(data)
            (work / "stats").write_bytes(b"\0" * 8 * _STAT_FIELDS)
            cmd = [sys.executable, "-m", "tools.fuzz", "--atheris-child", name, "--runs", str(counts[name]),
                   "--seed", str(seed), "--workdir", str(work), "--slow-s", str(slow_s)]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False,
                                  cwd=str(Path(__file__).resolve().parent.parent))
            elapsed = time.perf_counter() - t0
            n, accepted, rejected, max_ns = struct.unpack(f"<{_STAT_FIELDS}q", (work / "stats").read_bytes())
            stats = _Stats(name, slow_s)
            stats.inputs, stats.accepted, stats.rejected, stats.max_s, stats.seconds = n, accepted, rejected, max_ns / 1e9, elapsed
            findings_file = work / "findings.jsonl"
            if findings_file.exists():
                for line in findings_file.read_text().splitlines():
                    rec = json.loads(line)
                    stats._finding(rec["kind"], rec["exception"], rec["message"], rec["where"], rec["index"],
                                   bytes.fromhex(rec["input"]))
            if proc.returncode != 0:
                tail = (proc.stderr or "")[-_MSG_LIMIT:]
                stats._finding("engine", f"exit {proc.returncode}", tail, "", n, b"")
            result = stats.result()
            result["coverage"] = _last_cov(proc.stderr or "")
            per[name] = result
    return {"engine": "atheris", "seed": seed, "inputs": inputs, "slow_s": slow_s, "targets": per,
            "totals": _totals(per, time.perf_counter() - started),
            "python": ".".join(map(str, sys.version_info[:3]))}


def _last_cov(log: str) -> int | None:
    found = re.findall(r"\bcov: (\d+)", log)
    return int(found[-1]) if found else None


_INSTRUMENTED = ("drivers.scan", "drivers.frames", "drivers.scanner_json", "drivers.bus", "dealer.core.money", "dealer.core.cards",
                 "dealer.core.events", "dealer.games", "dealer.core.messages", "dealer.core.round", "dealer.core.table", "dealer.edge.topics",
                 "dealer.edge.config", "dealer.edge.service")


def _atheris_child(name: str, runs: int, seed: int, work: Path, slow_s: float) -> None:
    """Runs inside the child: libFuzzer calls ``one`` until ``runs`` and then exits the process,
    so counters live in a shared file mapping and findings are appended as they happen."""
    import importlib

    import atheris

    # Coverage of the code under test only: instrumenting every loaded module (pydantic,
    # structlog ...) with instrument_all() costs half a minute per child and adds noise.
    with atheris.instrument_imports(include=["dealer", "drivers"]):
        for module in _INSTRUMENTED:
            importlib.import_module(module)
    fd = os.open(work / "stats", os.O_RDWR)
    mm = mmap.mmap(fd, 8 * _STAT_FIELDS)
    counters = memoryview(mm).cast("q")
    out = os.open(work / "findings.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    seen: dict[tuple[str, str, str], int] = {}
    target = _target_classes()[name]()
    target.setup(seed)
    _quiet_logs().__enter__()  # for the whole child, which libFuzzer ends with exit()

    def one(data: bytes) -> None:
        inp = target.from_bytes(data)
        t0 = time.perf_counter_ns()
        outcome = run_one(target, inp)
        elapsed = time.perf_counter_ns() - t0
        index = counters[0]
        counters[0] += 1
        counters[1 if outcome.result == "accepted" else 2] += 1
        counters[3] = max(counters[3], elapsed)
        records = []
        if outcome.result == "finding":
            records.append((outcome.kind, outcome.exception, outcome.message, outcome.where))
        if elapsed > slow_s * 1e9:
            records.append(("slow", "", f"one call took {elapsed / 1e9:.3f} s (limit {slow_s} s)", ""))
        for kind, exc, message, where in records:
            key = (kind, exc, where)
            seen[key] = seen.get(key, 0) + 1
            if seen[key] <= 1000:  # the count of a finding is capped in this engine
                os.write(out, (json.dumps({"kind": kind, "exception": exc, "message": message, "where": where,
                                           "index": index, "input": data[:2048].hex()}) + "\n").encode())

    args = [sys.argv[0], f"-runs={runs}", f"-seed={seed % 2**31 or 1}", "-max_len=8192", "-timeout=30",
            "-rss_limit_mb=4096", "-print_final_stats=1", str(work / "corpus")]
    atheris.Setup(args, one)
    atheris.Fuzz()


# --- command line -----------------------------------------------------------------------------


def _add_arguments(p: argparse.ArgumentParser) -> None:
    from dealer.cli.args import int_range, seconds

    p.add_argument("--inputs", type=int_range(0), default=1_000_000,
                   help="generated inputs in total, split evenly over the targets (default 1000000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated inputs (default 0)")
    p.add_argument("--target", action="extend", nargs="+", choices=TARGETS, metavar="T",
                   help=f"only these targets (repeatable; default all: {', '.join(TARGETS)})")
    p.add_argument("--engine", choices=["generator", "atheris"], default="generator",
                   help="generator: structured mutation from valid seeds (default); atheris: coverage-guided "
                        "libFuzzer, the same targets and checks (needs `pip install atheris`)")
    p.add_argument("--slow-ms", type=seconds(0, 3_600_000, unit="milliseconds"), default=SLOW_S * 1000,
                   help="report a single call slower than this many milliseconds")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")


def _cmd(args: argparse.Namespace) -> int:
    if args.inputs < 0:
        print("dealer bench fuzz: --inputs must be >= 0", file=sys.stderr)
        return 2
    slow_s = args.slow_ms / 1000
    if args.engine == "atheris":
        if not atheris_available():
            print("dealer bench fuzz: --engine atheris needs atheris (pip install atheris)", file=sys.stderr)
            return 2
        result = run_atheris(args.inputs, args.seed, args.target, slow_s=slow_s)
    else:
        result = run_fuzz(args.inputs, args.seed, args.target, slow_s=slow_s, progress=False if args.quiet else None)
    print(json.dumps(result, sort_keys=True))
    return 1 if result["totals"]["findings"] else 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``fuzz`` to the ``dealer bench`` subcommands: ``register(bench_subparsers)``."""
    p = subparsers.add_parser("fuzz", help="fuzz the frame codec, every MQTT payload parser, the action handler, "
                                           "the config loader and the stud, Seotda and Matgo commands on a live "
                                           "service (JSON figures; exit 1 on findings)")
    _add_arguments(p)
    p.set_defaults(func=_cmd)
    return p


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.fuzz", description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    p.add_argument("--atheris-child", metavar="TARGET", help=argparse.SUPPRESS)
    p.add_argument("--runs", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    p.add_argument("--slow-s", type=float, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.atheris_child:
        _atheris_child(args.atheris_child, args.runs, args.seed, Path(args.workdir),
                       args.slow_s if args.slow_s is not None else SLOW_S)
        return 0
    return _cmd(args)


if __name__ == "__main__":
    raise SystemExit(main())
