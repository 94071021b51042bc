"""Configuration: the shipped example loads, env overrides work, bad configs fail clearly.

Also checks that the deploy artefacts (Prometheus rules, Grafana dashboard) only name
metrics the backend really exports. No YAML library needed: the rules are read as text.
"""

from __future__ import annotations

import json
import os
import re
from decimal import Decimal
from pathlib import Path

import pytest
from prometheus_client.metrics import MetricWrapperBase

from dealer.edge.config import ConfigError, Settings, load_settings
from dealer.games.teen_patti import TeenPattiOptions
from dealer.edge.metrics import Metrics
from dealer.core.round import BetLimit, TableRules
from tests.harness_cli import run_cli, without_dealer_settings
from tests.harness_docs import ALERTS, DASHBOARD, EXAMPLE, alert_rules

METRIC_NAME = re.compile(r"dealer_[a-z_]+")


@pytest.fixture(autouse=True)
def _no_dealer_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's DEALER_* variables must not leak into these tests."""
    for key in list(os.environ):
        if key.upper().startswith("DEALER_"):
            monkeypatch.delenv(key)


# --- the shipped example ----------------------------------------------------------------


def test_example_config_loads_and_builds_rules() -> None:
    s = load_settings(EXAMPLE)
    assert isinstance(s, Settings)
    assert [t.id for t in s.tables] == ["TP1", "TP2", "ST1", "SD1"]
    assert s.mqtt.url == "mqtt://127.0.0.1:1883"
    assert s.service.journal_path == Path("/var/lib/dealer/journal.sqlite")
    assert s.service.metrics_port == 9108

    tp1, tp2, st1, sd1 = s.tables
    assert tp1.scanner.kind == "serial"
    assert tp1.scanner.port == "/dev/serial/by-id/usb-Studio_Shoe_SC1-if00-port0"
    assert tp2.scanner.kind == "mqtt" and tp2.scanner.port is None

    for cfg in s.tables:
        rules = cfg.rules()
        assert isinstance(rules, TableRules)
        assert rules.table_id == cfg.id
        assert rules.game.name == {"ST1": "stud", "SD1": "seotda"}.get(cfg.id, "teen-patti")
        assert rules.minor_unit == Decimal("1" if cfg.id == "SD1" else "0.01") and isinstance(rules.minor_unit, Decimal)
        for limit in rules.limits.values():
            assert isinstance(limit, BetLimit)
            assert isinstance(limit.min, Decimal) and isinstance(limit.max, Decimal)
            assert 0 < limit.min <= limit.max

    stud = st1.rules()
    assert stud.action_ms == 20_000 and stud.limits["chips"] == BetLimit(Decimal("10.00"), Decimal("1000.00"))
    assert stud.game.options.street_limits[7].max == Decimal("6.00")

    seotda = sd1.rules()
    assert seotda.game.options.stake == Decimal(10) and seotda.game.options.min_chips == Decimal(600)

    r1, r2 = tp1.rules(), tp2.rules()
    assert set(r1.limits) == set(r1.game.bet_types)  # TP1 limits every bet type
    assert r1.limits["tie"] == BetLimit(Decimal("1.00"), Decimal("500.00"))
    assert [p.name for p in r1.game.deal_plan()] == ["A1", "B1", "A2", "B2", "A3", "B3"]
    # TP2's house options really reach the game
    opts = r2.game.options
    assert isinstance(opts, TeenPattiOptions)
    assert opts.deal_order == "BLOCK" and opts.burn_cards == 1
    assert opts.six_card_wheel == "NOT_ALLOWED" and opts.allow_opposite_main_bets is False
    assert opts.tie_ratio == Decimal("40") and opts.main_ratio == Decimal("0.95")
    assert [p.name for p in r2.game.deal_plan()] == ["BURN1", "A1", "A2", "A3", "B1", "B2", "B3"]
    assert r2.game.check_bet("player_b", frozenset({"player_a"})) is not None


def test_env_overrides_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEALER_MQTT__URL", "mqtt://broker.studio.lan:1884")
    monkeypatch.setenv("DEALER_SERVICE__METRICS_PORT", "9200")
    s = load_settings(EXAMPLE)
    assert s.mqtt.url == "mqtt://broker.studio.lan:1884"
    assert s.service.metrics_port == 9200
    # only the named keys change: the rest of each section still comes from the file
    assert s.mqtt.client_id == "dealer-backend-studio-host-1"
    assert s.mqtt.username == "dealer-backend"
    assert s.service.journal_path == Path("/var/lib/dealer/journal.sqlite")
    assert s.service.node_id == "studio-host-1"
    assert [t.id for t in s.tables] == ["TP1", "TP2", "ST1", "SD1"]


def test_env_override_is_validated_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEALER_SERVICE__METRICS_PORT", "not-a-port")
    with pytest.raises(ConfigError) as err:
        load_settings(EXAMPLE)
    assert "service.metrics_port" in str(err.value)

    monkeypatch.delenv("DEALER_SERVICE__METRICS_PORT")
    monkeypatch.setenv("DEALER_MQTT__HOSTNAME", "broker")  # a typo'd nested key is an error, not ignored
    with pytest.raises(ConfigError) as err:
        load_settings(EXAMPLE)
    assert "mqtt.hostname" in str(err.value)


# --- bad configs ------------------------------------------------------------------------

BASE = """\
[service]
journal_path = "journal.sqlite"
metrics_port = 0

[[tables]]
id = "TP1"
game = "teen-patti"
minor_unit = "0.01"

[tables.scanner]
kind = "mqtt"
reader_id = "SC1"

[tables.limits.player_a]
min = "1.00"
max = "100.00"

[tables.options]
deal_order = "ALTERNATE"
"""

SECOND_TABLE = """
[[tables]]
id = "TP1"
game = "teen-patti"

[tables.scanner]
kind = "mqtt"
reader_id = "SC2"
"""


def write(tmp_path: Path, text: str, name: str = "dealer.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_base_config_is_valid(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, BASE))
    assert s.tables[0].rules().limits["player_a"] == BetLimit(Decimal("1.00"), Decimal("100.00"))


BAD_CONFIGS = {
    "unknown key at top level": (
        'colour = "red"\n' + BASE, ["colour"]),
    "unknown key in a section": (
        BASE.replace("metrics_port = 0\n", "metrics_port = 0\nmetric_port = 9108\n"), ["service.metric_port"]),
    "unknown key inside a table": (
        BASE.replace('game = "teen-patti"\n', 'game = "teen-patti"\ncolour = "red"\n'), ["tables.0.colour"]),
    "unknown house option": (
        BASE.replace('deal_order = "ALTERNATE"\n', 'deal_order = "ALTERNATE"\nshuffle_machine = true\n'),
        ["shuffle_machine"]),
    "bad house option value": (
        BASE.replace('deal_order = "ALTERNATE"', 'deal_order = "CLOCKWISE"'), ["deal_order"]),
    "minor_unit as a TOML float": (
        BASE.replace('minor_unit = "0.01"', "minor_unit = 0.01"), ["minor_unit", "float"]),
    "limit as a TOML float": (
        BASE.replace('min = "1.00"', "min = 1.5"), ["limits.player_a.min", "float"]),
    "pay ratio as a TOML float": (
        BASE.replace('deal_order = "ALTERNATE"\n', 'deal_order = "ALTERNATE"\nmain_ratio = 0.95\n'),
        ["main_ratio", "float"]),
    "limits for an unknown bet type": (
        BASE + '\n[tables.limits.banker]\nmin = "1"\nmax = "2"\n', ["banker"]),
    "limit min > max": (
        BASE.replace('max = "100.00"', 'max = "0.50"'), ["tables.0.limits.player_a", "min"]),
    "duplicate table ids": (
        BASE + SECOND_TABLE, ["duplicate table ids", "TP1"]),
    "duplicate scanner reader ids": (
        BASE + SECOND_TABLE.replace('id = "TP1"', 'id = "TP2"').replace("SC2", "SC1"),
        ["duplicate scanner reader ids", "SC1"]),
    "serial scanner without port": (
        BASE.replace('kind = "mqtt"', 'kind = "serial"'), ["tables.0.scanner", "port"]),
    "flood burst below 1": (
        BASE.replace('kind = "mqtt"', 'kind = "mqtt"\nflood_burst = 0'), ["tables.0.scanner.flood_burst"]),
    "flood window not positive": (
        BASE.replace('kind = "mqtt"', 'kind = "mqtt"\nflood_window = 0'), ["tables.0.scanner.flood_window"]),
    "message limit below the minimum": (
        BASE.replace("metrics_port = 0\n", "metrics_port = 0\nmax_message_bytes = 8000\n"),
        ["service.max_message_bytes", "16384"]),
    "message limit too small for a stud result": (
        BASE.replace("metrics_port = 0\n", "metrics_port = 0\nmax_message_bytes = 32768\n")
        + SECOND_TABLE.replace('id = "TP1"', 'id = "ST1"').replace('game = "teen-patti"', 'game = "stud"'),
        ["max_message_bytes", "65536", "Seven-Card Stud", "ST1"]),
    "message limit above 256 MiB": (
        BASE.replace("metrics_port = 0\n", "metrics_port = 0\nmax_message_bytes = 268435457\n"),
        ["service.max_message_bytes"]),
    "unknown game": (
        BASE.replace('game = "teen-patti"', 'game = "baccarat"'), ["baccarat"]),
    "TOML syntax error": (
        BASE + "\n[[tables\n", ["line"]),
    "an MQTT client the bus cannot speak through": (
        BASE.replace("[service]", '[mqtt]\nurl = "mqtt://127.0.0.1:1883"\nclient = "mosquitto"\n\n[service]'),
        ["mqtt.client", "gmqtt", "paho"]),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_bad_config_is_refused_naming_the_key(tmp_path: Path, case: str) -> None:
    text, expected = BAD_CONFIGS[case]
    with pytest.raises(ConfigError) as err:
        load_settings(write(tmp_path, text))
    msg = str(err.value)
    assert msg.startswith("invalid configuration")
    for needle in expected:
        assert needle in msg, f"{case}: {needle!r} not in {msg!r}"


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as err:
        load_settings(missing)
    assert str(missing) in str(err.value)


def test_unknown_house_option_location_names_options(tmp_path: Path) -> None:
    text, _ = BAD_CONFIGS["unknown house option"]
    with pytest.raises(ConfigError) as err:
        load_settings(write(tmp_path, text))
    assert "tables.0.options.shuffle_machine" in str(err.value)


def test_unreadable_file_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, BASE)
    real_open = Path.open

    def deny(self: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self == path:  # what chmod 600 root:root does to User=dealer (tests may run as root)
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", deny)
    with pytest.raises(ConfigError):
        load_settings(path)


@pytest.mark.integration
def test_dealer_run_with_a_bad_config_exits_2(tmp_path: Path) -> None:
    bad = write(tmp_path, BASE.replace('minor_unit = "0.01"', "minor_unit = 0.01"), "bad.toml")
    proc = run_cli("run", "--config", str(bad), env=without_dealer_settings())
    assert proc.returncode == 2, proc.stderr
    assert "minor_unit" in proc.stderr and "float" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.mark.integration
def test_dealer_run_with_a_missing_config_exits_2(tmp_path: Path) -> None:
    proc = run_cli("run", "--config", str(tmp_path / "missing.toml"), env=without_dealer_settings())
    assert proc.returncode == 2, proc.stderr
    assert "missing.toml" in proc.stderr and "does not exist" in proc.stderr


# --- deploy artefacts only name real metrics ---------------------------------------------


def exported_metric_names() -> set[str]:
    """Every sample name a backend's registry exports (labelled metrics get one child)."""
    from dealer.edge.leases import lease_metrics

    m = Metrics()
    leases = lease_metrics(m.registry)  # a cluster node's lease metrics, on the same registry
    for metric in [*vars(m).values(), *vars(leases).values()]:
        if isinstance(metric, MetricWrapperBase) and metric._labelnames:
            metric.labels(*["x"] * len(metric._labelnames))
    return {s.name for family in m.registry.collect() for s in family.samples}


def test_exported_names_follow_prometheus_conventions() -> None:
    names = exported_metric_names()
    assert {"dealer_scan_reads_total", "dealer_rescans_total", "dealer_rounds_total", "dealer_link_up",
            "dealer_outbox_pending", "dealer_scan_to_publish_seconds_bucket"} <= names


def test_alert_rules_reference_only_exported_metrics() -> None:
    text = ALERTS.read_text()
    rules = alert_rules(text)
    assert len(rules) == text.count("- alert:") >= 7
    names = exported_metric_names()
    used: set[str] = set()
    for alert, expr in rules:
        found = set(METRIC_NAME.findall(expr))
        unknown = found - names
        assert not unknown, f"alert {alert} uses unknown metrics {sorted(unknown)}: {expr}"
        used |= found
    # the whole file (descriptions included) names no metric that does not exist
    assert set(METRIC_NAME.findall(text)) <= names
    # and the rules cover what the brief asks for
    assert {"dealer_link_up", "dealer_outbox_pending", "dealer_supervisor_alerts_total", "dealer_rescans_total",
            "dealer_scan_to_publish_seconds_bucket", "dealer_journal_commit_seconds_bucket",
            "dealer_bad_messages_total"} <= used
    by_name = dict(rules)
    assert "histogram_quantile(0.99" in by_name["DealerScanToPublishSlow"]


def _strings(node: object) -> list[str]:
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


def test_grafana_dashboard_is_valid_json_with_real_metrics() -> None:
    text = DASHBOARD.read_text()
    dash = json.loads(text)
    assert dash["schemaVersion"] >= 36
    assert any(i["name"] == "DS_PROMETHEUS" and i["pluginId"] == "prometheus" for i in dash["__inputs"])
    names = exported_metric_names()
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 7
    for p in dash["panels"]:
        for t in p.get("targets", []):
            assert p["datasource"]["uid"] == t["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
    used = {n for s in _strings(dash) for n in METRIC_NAME.findall(s)}
    unknown = used - names
    assert not unknown, f"dashboard uses unknown metrics {sorted(unknown)}"
    assert {"dealer_scan_reads_total", "dealer_rescans_total", "dealer_rounds_total",
            "dealer_scan_to_publish_seconds_bucket", "dealer_outbox_pending", "dealer_link_up",
            "dealer_journal_commit_seconds_bucket"} <= used


@pytest.mark.parametrize(("key", "value"), [("HOUSE_PLAYERS", "fork"), ("HOUSE_WORKERS", "0"),
                                            ("HOUSE_WORKERS", "65"), ("HOUSE_WORKERS", "two")])
def test_a_bad_house_player_setting_is_refused_naming_the_key(monkeypatch: pytest.MonkeyPatch, key: str,
                                                              value: str) -> None:
    """The house-player keys (issue 15) are validated like every other: one line naming the key."""
    monkeypatch.setenv(f"DEALER_SERVICE__{key}", value)
    with pytest.raises(ConfigError) as err:
        load_settings(EXAMPLE)
    assert f"service.{key.lower()}" in str(err.value) and "\n" not in str(err.value)
