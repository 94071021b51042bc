"""The example messages of ``docs/mqtt-topics.md``, produced by the core itself.

Each generated block in the doc follows a marker line ``<!-- example: NAME -->`` and is the
JSON the pure core (:class:`dealer.core.table.Table`) publishes for a scripted round of table TP1:
four accepted bets and one refused for being over its limit, a no-read and a duplicate card
during the deal (round 42), and a round voided by a supervisor after its first card (round
44). ``dealer schemas`` rewrites the blocks; ``dealer schemas --check`` and a test fail when
one differs from what the code produces, so the doc cannot drift from the behaviour.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dealer.core import round_ids
from dealer.core.acks import result_sha256
from dealer.edge.config import RulesConfig
from dealer.core.events import CloseBetting, Event, OpenRound, PlaceBet, ReadFailed, ScanRead, SupervisorVoid
from dealer.core.messages import RoundEvent, RoundResult, StationPrompt
from dealer.core.rules import canonical_rules, rules_from_canonical, software_version
from dealer.games import game_class
from dealer.core.table import Table

TABLE = "TP1"
SERIES = "k3m7x2qa"  # a journal id
READER = "SC1"
T0 = 1767261600000  # 2026-01-01T10:00:00Z: round 42 opens
#: Table TP1's rules in the examples: the Teen Patti defaults with these limits.
RULES = {"game": "teen-patti", "currency": "EUR", "minor_unit": "0.01", "betting_seconds": 15,
         "limits": {"player_a": {"min": "1.00", "max": "5000.00"}, "player_b": {"min": "1.00", "max": "5000.00"},
                    "tie": {"min": "1.00", "max": "500.00"}}}


def _rid(seq: int) -> str:
    return round_ids.make(TABLE, seq, SERIES)


def _script() -> list[tuple[int, Event]]:
    """The inputs of rounds 42 and 44, each with the time (epoch ms) it arrives."""
    r42, r44 = _rid(42), _rid(44)

    def bet(n: int, bet_type: str, stake: str, rid: str) -> PlaceBet:
        return PlaceBet(bet_id=f"bet-{n}", player_id=f"p-{n - 8000}", bet_type=bet_type, stake=stake, round_id=rid,
                        command_id=f"cmd-{n}")

    def read(code: str) -> ScanRead:
        return ScanRead(reader=READER, code=code)

    return [
        (T0, OpenRound(round_id=r42, betting_closes_at=T0 + 15_000)),
        (T0 + 2_100, bet(9001, "player_a", "10.00", r42)),
        (T0 + 3_400, bet(9002, "player_b", "7.30", r42)),
        (T0 + 5_020, bet(9003, "pair_plus_b", "5.00", r42)),
        (T0 + 7_800, bet(9004, "tie", "2.00", r42)),
        (T0 + 9_150, bet(9005, "tie", "750.00", r42)),  # over the tie limit (500.00): refused
        (T0 + 15_000, CloseBetting(by="timer")),
        (T0 + 17_210, read("QH")),  # A1
        (T0 + 18_900, read("9C")),  # B1
        (T0 + 19_640, ReadFailed(reader=READER, reason="noread")),  # A2: RESCAN
        (T0 + 20_310, read("QD")),  # A2
        (T0 + 22_500, read("QH")),  # B2: the duplicate, RESCAN
        (T0 + 23_980, read("5C")),  # B2
        (T0 + 25_120, read("7S")),  # A3
        (T0 + 26_470, read("2C")),  # B3: the result
        (T0 + 60_000, OpenRound(round_id=r44, betting_closes_at=T0 + 75_000)),
        (T0 + 64_000, bet(9020, "tie", "3.00", r44)),
        (T0 + 75_000, CloseBetting(by="timer")),
        (T0 + 78_300, read("4D")),  # A1
        (T0 + 90_000, SupervisorVoid(supervisor="sup-ana", reason="shoe jammed, cards exposed", round_id=r44,
                                     command_id="void-7f3c")),
    ]


def play() -> list[Any]:
    """Every effect the core produced for the script, in order (raises if an input the script
    expects to be accepted is refused: the examples must come from a round that happened)."""
    rules = rules_from_canonical(TABLE, canonical_rules(RulesConfig.model_validate(RULES)), software_version(),
                                 games=game_class)
    table = Table(rules, series=SERIES)
    table.last_seq = 41
    effects: list[Any] = []
    for at, event in _script():
        if isinstance(event, OpenRound) and event.round_id == _rid(44):
            table.last_seq = 43  # round 43 played in between, not shown
        step = table.handle(event.model_copy(update={"at": at}))
        expected_refusal = isinstance(event, PlaceBet) and event.bet_id == "bet-9005"
        if step.accepted == expected_refusal:
            raise AssertionError(f"the example script went off course at {event.type} ({at}): {step.effects}")
        effects += step.effects
    return effects


def _one(effects: list[Any], kind: type, pred: Callable[[Any], bool]) -> Any:
    found = [e for e in effects if isinstance(e, kind) and pred(e)]
    if len(found) != 1:
        raise AssertionError(f"expected one {kind.__name__} for the example, found {len(found)}")
    return found[0]


def _doc(msg: Any) -> dict[str, Any]:
    return json.loads(msg.model_dump_json())


def examples() -> dict[str, dict[str, Any]]:
    """The example messages by marker name."""
    effects = play()
    voided = _one(effects, RoundResult, lambda r: r.outcome == "VOIDED")
    return {
        "event-card-registered": _doc(_one(effects, RoundEvent, lambda e: e.event == "card_registered"
                                           and e.data.get("position") == "A1" and e.round_id == _rid(42))),
        "prompt-rescan": _doc(_one(effects, StationPrompt, lambda p: p.kind == "RESCAN"
                                   and p.reason == "duplicate_card")),
        "result-completed": _doc(_one(effects, RoundResult, lambda r: r.outcome == "COMPLETED")),
        "result-voided": _doc(voided),
        # settlement's acknowledgement of the voided result: its key and the SHA-256 of its bytes as
        # published (the compact block of result-voided is those bytes: hash that line to check it)
        "ack-voided": {"idempotency_key": voided.idempotency_key,
                       "result_sha256": result_sha256(voided.model_dump_json().encode())},
    }


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _spaced(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _pretty(doc: dict[str, Any]) -> str:
    """One key per line; a value holding objects or lists gets one line per entry."""
    lines = ["{"]
    items = list(doc.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if isinstance(value, dict) and value and any(isinstance(v, (dict, list)) for v in value.values()):
            inner = list(value.items())
            lines.append(f"  {json.dumps(key)}: {{")
            for j, (k, v) in enumerate(inner):
                lines.append(f"    {json.dumps(k)}: {_spaced(v)}{',' if j < len(inner) - 1 else ''}")
            lines.append(f"  }}{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {_spaced(value)}{comma}")
    lines.append("}")
    return "\n".join(lines)


#: How each block is written in the doc.
_FORMAT: dict[str, Callable[[Any], str]] = {
    "event-card-registered": _compact,
    "prompt-rescan": _compact,
    "result-completed": _pretty,
    "result-voided": _compact,
    "ack-voided": _spaced,
}

_BLOCK = re.compile(r"(<!-- example: (?P<name>[a-z0-9-]+) -->\n```json\n)(?P<body>.*?)(\n```)", re.S)


def render_doc(text: str) -> tuple[str, list[str]]:
    """``text`` with every marked block rewritten from the code, and the names of the blocks
    that changed. A marker naming no example is an error."""
    made = examples()
    changed: list[str] = []

    def replace(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in _FORMAT:
            raise ValueError(f"docs example marker {name!r} names no example (known: {', '.join(_FORMAT)})")
        body = _FORMAT[name](made[name])
        if body != m.group("body"):
            changed.append(name)
        return m.group(1) + body + m.group(4)

    return _BLOCK.sub(replace, text), changed


def marked(text: str) -> list[str]:
    return [m.group("name") for m in _BLOCK.finditer(text)]


def check_examples(doc: Path) -> list[str]:
    """Names of the generated blocks in ``doc`` that differ from what the code produces."""
    return render_doc(doc.read_text(encoding="utf-8"))[1]


def write_examples(doc: Path) -> list[str]:
    """Rewrite the generated blocks of ``doc``; returns the names of those that changed."""
    text = doc.read_text(encoding="utf-8")
    new, changed = render_doc(text)
    if changed:
        doc.write_text(new, encoding="utf-8")
    return changed


__all__ = ["check_examples", "examples", "marked", "play", "render_doc", "write_examples"]
