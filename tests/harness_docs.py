"""Test harness: what the docs say, read by the tests that hold the code to them. The
scanner protocol's tables (docs/scanner-protocol.md) and the signed supervisor commands'
worked example (docs/mqtt-topics.md §10): a doc and the code cannot drift apart."""

from __future__ import annotations

import re

from tests.harness import ROOT

SCANNER_PROTOCOL = ROOT / "docs" / "scanner-protocol.md"
MQTT_TOPICS = ROOT / "docs" / "mqtt-topics.md"


def doc_table(heading: str) -> list[list[str]]:
    """Rows (cells without backticks) of the first markdown table after ``heading``."""
    text = SCANNER_PROTOCOL.read_text(encoding="utf-8")
    start = text.index(heading)
    rows = []
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set("".join(cells)) <= set("-: "):
            continue
        rows.append([c[1:-1] if c.startswith("`") and c.endswith("`") else c for c in cells])
    return rows[1:]  # without the header row


def parse_inputs(cell: str) -> list[tuple[str, int | None, str]]:
    out = []
    for item in filter(None, (s.strip() for s in cell.split(";"))):
        kind, seq, *rest = item.split(" ", 2)
        out.append((kind, int(seq), rest[0] if rest else ""))
    return out


# --- the signed supervisor commands' worked example (docs/mqtt-topics.md §10) -----------------------

#: §10 of docs/mqtt-topics.md, the signed supervisor commands
SECTION = MQTT_TOPICS.read_text(encoding="utf-8").split("## 10. Signed supervisor commands", 1)[1]


def doc_rows(heading: str) -> list[list[str]]:
    """Cells (backticks stripped) of the first table at or after ``heading`` in §10, header dropped."""
    rows = []
    for line in SECTION[SECTION.index(heading):].splitlines():
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if not set("".join(cells)) <= set("-: "):
            rows.append(cells)
    return rows[1:]


def doc_block(heading: str, lang: str) -> str:
    """The first ```lang block after ``heading`` in §10."""
    rest = SECTION[SECTION.index(heading):]
    m = re.search(rf"^```{lang}\n(.*?)^```$", rest, re.S | re.M)
    assert m, f"no {lang} block after {heading!r}"
    return m.group(1)


DOC_KEYS = {name: bytes.fromhex(k) for name, k in doc_rows("Test keys, for this example only")}
