"""The Grafana dashboard and the alerts' runbook, checked as files (no network, no promtool).

* Every query of deploy/grafana/dealer-dashboard.json names only metrics a backend's registry
  really exports (dealer/edge/metrics.py, with the cluster's lease metrics of
  dealer/edge/leases.py and the scanner key collector on the same registry), and only labels
  those metrics carry (plus the scrape's ``instance`` and ``job`` and a histogram's ``le``).
* The panels an operator needs exist (issue 28): table state (open / paused / closing /
  closed per table), security events by kind and the unjournaled ones, supervisor acts (table
  operations, voids), cluster leases (held per node and table, epochs, acquisitions and
  losses, live nodes, clock skew), and rescans per *reader* (grouped by the ``reader`` label
  that ``dealer_table_reader_info`` joins to every per-table series).
* The layout is sound: unique ids, every panel inside the 24 columns, no two panels overlap.
* Every alert of deploy/prometheus/alerts.yml links its runbook section
  (``runbook_url: docs/operations.md#<anchor>``), and that anchor is a heading of
  docs/operations.md under its "Runbook" heading (GitHub's anchors), with a body that says
  what the alert means, what to look at first and what to do.

promtool's own checks (the queries parse, the rules' unit tests) are in
tests/test_deploy_security.py.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.metrics import MetricWrapperBase

from dealer.edge.leases import lease_metrics
from dealer.edge.metrics import Metrics, ScannerKeyUses
from tests.harness_docs import ALERTS, DASHBOARD

ROOT = Path(__file__).resolve().parent.parent
OPERATIONS = ROOT / "docs" / "operations.md"
RUNBOOK_PREFIX = "docs/operations.md#"

#: Labels every scraped series has besides its own, and the one a histogram's buckets add.
SCRAPE_LABELS = {"instance", "job"}
#: Metrics Prometheus itself makes for every target.
PROMETHEUS_METRICS = {"up": set()}

PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
                   "bool", "offset", "inf", "nan"}


# --- what the backend exports -----------------------------------------------------------------


def exported_metrics() -> dict[str, set[str]]:
    """Every sample name a backend's registry can export -> the label names it carries."""
    m = Metrics()
    leases = lease_metrics(m.registry)
    m.registry.register(ScannerKeyUses(lambda: [("R", SimpleNamespace(fingerprints=["0" * 16], verified=[1]))]))
    for metric in [*vars(m).values(), *vars(leases).values()]:
        if isinstance(metric, MetricWrapperBase) and metric._labelnames:
            metric.labels(*["x"] * len(metric._labelnames))
    out: dict[str, set[str]] = {}
    for family in m.registry.collect():
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


def test_the_registry_has_the_metrics_the_panels_need() -> None:
    """The names this file's checks rely on, as prometheus_client exports them."""
    names = exported_metrics()
    for name, labels in {
        "dealer_table_operating": {"table", "state"},
        "dealer_security_events_total": {"table", "kind"},
        "dealer_security_events_unjournaled_total": {"table"},
        "dealer_table_operations_total": {"table", "operation", "outcome"},
        "dealer_rounds_total": {"table", "game", "outcome"},
        "dealer_table_lease_held": {"table"},
        "dealer_lease_epoch": {"table"},
        "dealer_lease_acquisitions_total": {"table", "reason"},
        "dealer_lease_losses_total": {"table", "reason"},
        "dealer_cluster_nodes_live": set(),
        "dealer_clock_skew_seconds": set(),
        "dealer_rescans_total": {"table", "reason"},
        "dealer_table_reader_info": {"table", "reader", "game"},
        "dealer_scanner_key_uses_total": {"reader", "key"},
    }.items():
        assert name in names, name
        assert names[name] == labels, (name, names[name])


# --- PromQL, read well enough to name its metrics and labels ----------------------------------


def _strip_strings(expr: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """(metric, labels matched in its braces) for every ``metric{...}`` and bare ``metric``."""
    expr = _strip_strings(expr)
    out: list[tuple[str, set[str]]] = []
    for m in re.finditer(r"\{([^}]*)\}", expr):
        before = expr[:m.start()]
        name = re.search(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*$", before)
        labels = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(1)))
        out.append((name.group(1) if name else "", labels))
    bare = re.sub(r"[A-Za-z_:][A-Za-z0-9_:]*\s*\{[^}]*\}|\{[^}]*\}", " ", expr)  # found above
    bare = re.sub(r"\[[^\]]*\]", " ", bare)  # ranges and subqueries: [5m], [$__rate_interval]
    bare = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", bare)
    bare = re.sub(r"\$\w+", " ", bare)
    for m in re.finditer(r"(?<![\w.$])([A-Za-z_:][A-Za-z0-9_:]*)\b(?!\s*\()", bare):
        word = m.group(1)
        if word.lower() not in PROMQL_KEYWORDS and not re.fullmatch(r"\d.*", word):
            out.append((word, set()))
    return out


def grouping_labels(expr: str) -> set[str]:
    """Labels named in by / without / on / ignoring / group_left / group_right clauses."""
    found: set[str] = set()
    for m in re.finditer(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr):
        found.update(x.strip() for x in m.group(1).split(",") if x.strip())
    return found


def by_labels(expr: str) -> set[str]:
    found: set[str] = set()
    for m in re.finditer(r"\bby\s*\(([^)]*)\)", expr):
        found.update(x.strip() for x in m.group(1).split(",") if x.strip())
    return found


def test_the_promql_reader_finds_metrics_and_labels() -> None:
    expr = ('sum by (reader) (rate(dealer_rescans_total{instance=~"$instance", table=~"a|b"}[$__rate_interval])'
            ' * on (instance, table) group_left (reader) dealer_table_reader_info) or vector(0)'
            ' unless up{job="dealer"} == 0 and dealer_link_up offset 5m')
    assert selectors(expr) == [("dealer_rescans_total", {"instance", "table"}), ("up", {"job"}),
                               ("dealer_table_reader_info", set()), ("dealer_link_up", set())]
    assert grouping_labels(expr) == {"reader", "instance", "table"}
    assert by_labels(expr) == {"reader"}


# --- the dashboard ----------------------------------------------------------------------------


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    return [q for p in dash["panels"] for q in [p, *p.get("panels", [])]]


def exprs(panel: dict[str, Any]) -> list[str]:
    return [t["expr"] for t in panel.get("targets", [])]


def panel_like(dash: dict[str, Any], title: str) -> dict[str, Any]:
    found = [p for p in panels(dash) if re.search(title, p.get("title", ""), re.I)]
    assert found, f"no panel whose title matches {title!r}: {[p.get('title') for p in panels(dash)]}"
    assert len(found) == 1, f"several panels match {title!r}: {[p['title'] for p in found]}"
    return found[0]


def test_every_query_names_only_exported_metrics_and_their_labels() -> None:
    known = {**exported_metrics(), **PROMETHEUS_METRICS}
    dash = dashboard()
    queries = [(p["title"], e) for p in panels(dash) for e in exprs(p)]
    queries += [(f"variable {v['name']}", v["definition"]) for v in dash["templating"]["list"]]
    assert len(queries) >= 20
    for where, expr in queries:
        expr_v = re.sub(r"label_values\((.*), *\w+\)$", r"\1", expr)
        named = selectors(expr_v)
        assert named, f"{where}: no metric found in {expr!r}"
        allowed = set(SCRAPE_LABELS) | {"le"}
        for name, labels in named:
            assert name in known, f"{where}: {name!r} is not exported by the backend: {expr}"
            assert labels <= known[name] | SCRAPE_LABELS, \
                f"{where}: {name} has no label {sorted(labels - known[name] - SCRAPE_LABELS)}: {expr}"
            allowed |= known[name]
        assert grouping_labels(expr_v) <= allowed, \
            f"{where}: grouping by labels none of its metrics has {sorted(grouping_labels(expr_v) - allowed)}: {expr}"


def test_every_panel_uses_the_dashboards_prometheus_datasource() -> None:
    for p in panels(dashboard()):
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, p["title"]
        assert p.get("targets"), f"{p['title']}: no query"
        for t in p["targets"]:
            assert t["datasource"] == p["datasource"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), f"{p['title']}: refIds repeat"


def test_panel_ids_are_unique_and_the_grid_has_no_overlap() -> None:
    dash = dashboard()
    ids = [p["id"] for p in panels(dash)]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    cells: dict[tuple[int, int], str] = {}
    for p in dash["panels"]:  # a collapsed row's panels take no room until it is opened
        g = p["gridPos"]
        assert g["x"] >= 0 and g["y"] >= 0 and g["w"] > 0 and g["h"] > 0 and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']!r} overlaps {cells[(x, y)]!r} at x={x} y={y}"
                cells[(x, y)] = p["title"]


def test_the_table_state_panel_shows_open_paused_closing_and_closed_per_table() -> None:
    p = panel_like(dashboard(), r"^table state")
    assert p["type"] == "state-timeline"
    joined = " ".join(exprs(p))
    assert "dealer_table_operating" in joined
    assert by_labels(joined) >= {"table"}
    texts = {o["text"] for m in p["fieldConfig"]["defaults"]["mappings"] for o in m["options"].values()}
    assert {"open", "paused", "closing", "closing_paused", "closed"} <= texts
    for state in ("open", "paused", "closing", "closing_paused", "closed"):
        assert f'state="{state}"' in joined, state


def test_the_security_panels_show_events_by_kind_and_the_unjournaled_ones() -> None:
    dash = dashboard()
    events = " ".join(exprs(panel_like(dash, r"^security events by kind")))
    assert "dealer_security_events_total" in events and by_labels(events) >= {"table", "kind"}
    flood = " ".join(exprs(panel_like(dash, r"unjournaled")))
    assert "dealer_security_events_unjournaled_total" in flood and "table" in by_labels(flood)


def test_the_supervisor_acts_panel_shows_operations_by_table_and_outcome_and_voids() -> None:
    p = panel_like(dashboard(), r"^supervisor acts")
    joined = " ".join(exprs(p))
    assert "dealer_table_operations_total" in joined
    assert by_labels(joined) >= {"table", "operation", "outcome"}
    assert re.search(r'dealer_rounds_total\{[^}]*outcome="voided"', joined), "voids are supervisor acts too"


def test_the_cluster_panels_show_leases_epochs_moves_nodes_and_clock_skew() -> None:
    dash = dashboard()
    held = panel_like(dash, r"^lease held")
    assert held["type"] == "state-timeline"
    assert "dealer_table_lease_held" in " ".join(exprs(held)) and by_labels(" ".join(exprs(held))) >= {"instance",
                                                                                                      "table"}
    assert "dealer_lease_epoch" in " ".join(exprs(panel_like(dash, r"^lease epoch")))
    moves = " ".join(exprs(panel_like(dash, r"^lease acquisitions and losses")))
    assert "dealer_lease_acquisitions_total" in moves and "dealer_lease_losses_total" in moves
    assert "reason" in by_labels(moves)
    assert "dealer_cluster_nodes_live" in " ".join(exprs(panel_like(dash, r"^cluster nodes live")))
    skew = panel_like(dash, r"^clock skew")
    assert "dealer_clock_skew_seconds" in " ".join(exprs(skew)) and skew["fieldConfig"]["defaults"]["unit"] == "s"


def test_rescans_are_shown_per_reader_not_per_table() -> None:
    """One reader per table today, but the dashboard must say which reader: the join through
    dealer_table_reader_info puts the ``reader`` label on the per-table counters."""
    dash = dashboard()
    assert "reader" in exported_metrics()["dealer_table_reader_info"]
    rate = panel_like(dash, r"^rescan rate per reader")
    joined = " ".join(exprs(rate))
    assert re.search(r"dealer_rescans_total.*/.*dealer_scan_reads_total", joined, re.S)
    for e in exprs(rate):
        assert "reader" in by_labels(e) and "table" not in by_labels(e), e
        assert "dealer_table_reader_info" in e and "group_left (reader)" in e, e
    assert all(t["legendFormat"] == "{{reader}}" for t in rate["targets"])
    by_reason = " ".join(exprs(panel_like(dash, r"^rescans per reader")))
    assert "dealer_rescans_total" in by_reason and by_labels(by_reason) >= {"reader", "reason"}


# --- the runbook ------------------------------------------------------------------------------


def github_anchor(heading: str, seen: Counter[str]) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped (but ``-`` and
    ``_``), spaces to hyphens; a repeated one gets ``-1``, ``-2`` ..."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
    n = seen[slug]
    seen[slug] += 1
    return slug if n == 0 else f"{slug}-{n}"


def headings(markdown: str) -> list[tuple[int, str, str, int]]:
    """(level, text, anchor, line index) of every heading outside code fences."""
    out: list[tuple[int, str, str, int]] = []
    seen: Counter[str] = Counter()
    fence = False
    for i, line in enumerate(markdown.splitlines()):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
            continue
        m = None if fence else re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            out.append((len(m.group(1)), m.group(2), github_anchor(m.group(2), seen), i))
    return out


def test_github_anchors() -> None:
    seen: Counter[str] = Counter()
    assert github_anchor("DealerReaderDown", seen) == "dealerreaderdown"
    assert github_anchor("Runbook", seen) == "runbook"
    assert github_anchor("Runbook", seen) == "runbook-1"
    assert github_anchor("6.1 Signature: `dealer_x` (HMAC)", seen) == "61-signature-dealer_x-hmac"


def alert_annotations(text: str) -> dict[str, dict[str, str]]:
    """alert name -> its one-line annotations (runbook_url, summary), read as text."""
    out: dict[str, dict[str, str]] = {}
    blocks = re.split(r"^\s*- alert:\s*", text, flags=re.M)[1:]
    for block in blocks:
        name = block.split(None, 1)[0]
        assert name not in out, f"alert {name} twice"
        out[name] = dict(re.findall(r"^\s+(runbook_url|summary):\s*(.+?)\s*$", block, re.M))
    return out


def runbook_sections() -> dict[str, str]:
    """anchor -> body of every heading nested under the "Runbook" heading of docs/operations.md."""
    md = OPERATIONS.read_text()
    lines = md.splitlines()
    hs = headings(md)
    runbook = [h for h in hs if h[1] == "Runbook"]
    assert len(runbook) == 1, "docs/operations.md needs one 'Runbook' heading"
    level, _, _, start = runbook[0]
    out: dict[str, str] = {}
    inside = [h for h in hs if h[3] > start]
    for n, (lvl, _text, anchor, i) in enumerate(inside):
        if lvl <= level:
            break
        end = next((h[3] for h in inside[n + 1:]), len(lines))
        out[anchor] = "\n".join(lines[i + 1:end]).strip()
    return out


def test_every_alert_links_a_runbook_section_that_exists() -> None:
    alerts = alert_annotations(ALERTS.read_text())
    assert len(alerts) == ALERTS.read_text().count("- alert:") >= 30
    sections = runbook_sections()
    all_anchors = {h[2] for h in headings(OPERATIONS.read_text())}
    for name, ann in alerts.items():
        url = ann.get("runbook_url")
        assert url, f"alert {name} has no runbook_url annotation"
        assert url.startswith(RUNBOOK_PREFIX), f"alert {name}: runbook_url {url!r} is not {RUNBOOK_PREFIX}<anchor>"
        anchor = url[len(RUNBOOK_PREFIX):]
        assert anchor in all_anchors, f"alert {name}: docs/operations.md has no heading with anchor #{anchor}"
        assert anchor in sections, f"alert {name}: #{anchor} is not under the Runbook heading"
        assert anchor == name.lower(), f"alert {name}: its section is #{name.lower()}, not #{anchor}"


@pytest.mark.parametrize("name", sorted(alert_annotations(ALERTS.read_text())))
def test_each_runbook_section_says_what_it_means_what_to_look_at_and_what_to_do(name: str) -> None:
    body = runbook_sections().get(name.lower(), "")
    assert body, f"no runbook section for {name}"
    for part in ("**Means:**", "**Look first:**", "**Do:**"):
        assert part in body, f"runbook section {name} lacks {part}"


def test_the_runbook_has_no_section_for_an_alert_that_does_not_exist() -> None:
    alerts = {n.lower() for n in alert_annotations(ALERTS.read_text())}
    extra = set(runbook_sections()) - alerts
    assert not extra, f"runbook sections without an alert: {sorted(extra)}"
