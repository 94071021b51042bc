"""Test harness: what the docs and the deploy files say, read by the tests that hold the code
to them. The scanner protocol's tables (docs/scanner-protocol.md), the signed supervisor
commands' worked example (docs/mqtt-topics.md §10) and the alert rules' expressions: a doc
and the code cannot drift apart."""

from __future__ import annotations

import re

from tests.harness import ROOT

SCANNER_PROTOCOL = ROOT / "docs" / "scanner-protocol.md"
MQTT_TOPICS = ROOT / "docs" / "mqtt-topics.md"
EXAMPLE = ROOT / "deploy" / "tables" / "example.toml"  # the example deployment's tables
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "dealer-dashboard.json"


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


# --- the alert rules (deploy/prometheus/alerts.yml) ---------------------------------------------------


def alert_rules(text: str) -> list[tuple[str, str]]:
    """(alert name, expr) for every rule, read line by line (inline or folded block exprs)."""
    rules: list[tuple[str, str]] = []
    lines = text.splitlines()
    name = None
    for i, line in enumerate(lines):
        if m := re.match(r"\s*- alert:\s*(\S+)", line):
            name = m.group(1)
        elif m := re.match(r"(\s*)expr:\s*(.*)$", line):
            indent, rest = len(m.group(1)), m.group(2).strip()
            expr = [] if rest in (">-", ">", "|", "|-") else [rest]
            for cont in lines[i + 1:]:
                if cont.strip() and len(cont) - len(cont.lstrip()) <= indent:
                    break
                expr.append(cont.strip())
            assert name is not None, f"expr without an alert name at line {i + 1}"
            rules.append((name, " ".join(e for e in expr if e)))
    return rules
