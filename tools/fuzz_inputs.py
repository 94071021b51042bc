"""What fuzz inputs are made of (``dealer bench fuzz``): values that break parsers, JSON and
TOML writers that can say what no valid writer would, the byte and tree mutators, and
:class:`Violation`, the one exception a target raises for a broken property. The lowest of the
fuzz modules: every target imports from here, and this imports none of them."""

from __future__ import annotations

import copy
import json
import math
import random
import re
from decimal import Decimal
from typing import Any


MSG_LIMIT = 300
MAX_INPUT = 1 << 20  # mutated inputs are capped at 1 MiB
#: The HMAC key of the readers the harness signs for, and a key no reader has (forgeries).
KEY = bytes(range(32))
OTHER_KEY = bytes(range(100, 132))


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


def unicode_text(rng: random.Random, n: int | None = None) -> str:
    n = rng.randrange(1, 24) if n is None else n
    lo, hi = rng.choice(_UNICODE_RANGES)
    return "".join(chr(rng.randint(lo, hi)) for _ in range(n))


def deep(rng: random.Random) -> int:
    """A nesting depth, log-uniform up to 20 000 (parsers' limits sit around 200 and 1000)."""
    return int(10 ** rng.uniform(0.5, 4.3))


def _nested(rng: random.Random, inner: str = "1") -> Raw:
    d = deep(rng)
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
        return unicode_text(rng)
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
            d = deep(rng)
            b[i:i] = (b"[" * d + b"]" * d) if rng.random() < 0.6 else (b'{"a":' * d + b"1" + b"}" * d)
        elif op == 11 and n:  # repeat
            b = b * rng.randrange(2, 6)
        elif op == 12:  # a digit run becomes a huge or odd number
            runs = [m.span() for m in re.finditer(rb"[0-9]+", b)]
            if runs:
                s, e = rng.choice(runs)
                b[s:e] = rng.choice(_RAW_NUMBERS).encode()
        elif op == 13:  # unicode
            b[i:i] = encode_text(unicode_text(rng, rng.randrange(1, 6)))
        if len(b) > MAX_INPUT:
            del b[MAX_INPUT:]
    return bytes(b)


def tree_slots(obj: Any, out: list[tuple[Any, Any]], depth: int = 0) -> None:
    if depth > 12:
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((obj, k))
            tree_slots(v, out, depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append((obj, i))
            tree_slots(v, out, depth + 1)


def mutate_tree(obj: Any, rng: random.Random, keys: tuple[str, ...], strings: tuple[str, ...]) -> Any:
    """1-3 structural mutations of a JSON-like value: replace, drop, add or swap fields,
    retype, change a discriminator, nest deep."""
    obj = copy.deepcopy(obj)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        slots: list[tuple[Any, Any]] = []
        tree_slots(obj, slots)
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
            parent[rng.choice(keys) if rng.random() < 0.7 else unicode_text(rng)] = interesting(rng, strings)
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
            d = deep(rng)
            parent[key] = Raw("[" * d + dump_json(value) + "]" * d)
        elif op == 8 and isinstance(value, str):  # money-ish and unicode edits
            parent[key] = rng.choice((value + "0" * rng.randrange(1, 40), "-" + value, value + "e26", " " + value,
                                      value + unicode_text(rng, 1), value[: rng.randrange(len(value) + 1)]))
        else:
            parent[key] = Raw(rng.choice(_RAW_NUMBERS))
    return obj
