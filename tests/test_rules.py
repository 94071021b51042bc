"""The canonical form of a table's effective rules (dealer.core.rules): pure tests."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from dealer.edge.config import RulesConfig, load_settings
from dealer.core.events import EVENT_ADAPTER, RulesChanged
from dealer.games import GAMES, game_class
from dealer.core.rules import RulesError, canonical_rules, parse_canonical, rules_from_canonical, rules_hash, software_version
from dealer.core.table import Table


def _cfg(**kw):
    return RulesConfig.model_validate({"game": "teen-patti", **kw})


def test_canonical_bytes_are_stable_sorted_and_compact() -> None:
    text = canonical_rules(_cfg(limits={"player_a": {"min": "1.00", "max": "100.00"}}))
    assert text == canonical_rules(_cfg(limits={"player_a": {"min": "1.00", "max": "100.00"}}))
    doc = json.loads(text)
    assert json.dumps(doc, sort_keys=True, separators=(",", ":")) == text
    assert doc["format"] == 1 and doc["game"] == "teen-patti" and doc["limits"] == {"player_a": {"min": "1.00", "max": "100.00"}}
    assert doc["options"]["deal_order"] == "ALTERNATE"  # defaults are filled in
    assert rules_hash(text) == rules_hash(text) and len(rules_hash(text)) == 64


def test_equivalent_configs_have_the_same_bytes() -> None:
    a = _cfg(limits={"player_a": {"min": "1.00", "max": "100.00"}, "tie": {"min": "1", "max": "5"}},
             betting_seconds=15, alert_after=3, options={"main_ratio": "0.95", "burn_cards": 1})
    b = _cfg(options={"burn_cards": 1, "deal_order": "ALTERNATE", "main_ratio": "0.95"}, betting_seconds=15.0,
             limits={"tie": {"max": "5", "min": "1"}, "player_a": {"max": "100.00", "min": "1.00"}})
    assert canonical_rules(a) == canonical_rules(b)  # key order, defaults spelled out or not, 15 vs 15.0
    c = _cfg()
    assert canonical_rules(c) == canonical_rules(_cfg(options={"deal_order": "ALTERNATE", "burn_cards": 0}))
    assert canonical_rules(a) != canonical_rules(c)


def test_decimals_keep_their_written_precision() -> None:
    """The core shows amounts as configured ("at least 50.00"), so 1.00 and 1 are other rules."""
    one, cents = _cfg(options={"main_ratio": "0.95"}), _cfg(options={"main_ratio": "0.950"})
    assert canonical_rules(one) != canonical_rules(cents)
    r = rules_from_canonical("T1", canonical_rules(cents), games=game_class)
    assert str(r.game.options.main_ratio) == "0.950"
    tiny = canonical_rules(_cfg(minor_unit="0.0000001", options={}))
    assert '"minor_unit":"0.0000001"' in tiny and rules_from_canonical("T1", tiny, games=game_class).minor_unit == Decimal("1E-7")


def test_operational_settings_are_not_rules() -> None:
    base = {"id": "T1", "game": "teen-patti", "scanner": {"kind": "mqtt", "reader_id": "R1"}}
    s = load_settings(tables=[base, {**base, "id": "T2", "pause_seconds": 9, "auto_rounds": False,
                                     "scanner": {"kind": "mqtt", "reader_id": "R2"}}])
    r1, r2 = (t.rules() for t in s.tables)
    assert r1.rules_hash == r2.rules_hash and r1.table_id == "T1" and r2.table_id == "T2"


@pytest.mark.parametrize("change", [
    {"currency": "USD"}, {"minor_unit": "1"}, {"rounding": "HALF_UP"}, {"betting_seconds": 16},
    {"decision_seconds": 14}, {"action_seconds": 21}, {"alert_after": 4},
    {"limits": {"player_a": {"min": "1", "max": "99"}}}, {"limits": {"player_b": {"min": "1", "max": "100"}}},
    {"options": {"deal_order": "BLOCK"}}, {"options": {"burn_cards": 1}}, {"options": {"main_ratio": "0.96"}},
    {"options": {"pair_plus": {"trail_of_aces": "100", "three_of_a_kind": "40", "straight_flush": "35",
                               "straight": "6", "flush": "3", "pair": "2"}}},
])
def test_any_effective_change_changes_the_hash(change: dict) -> None:
    base = {"limits": {"player_a": {"min": "1", "max": "100"}}}
    changed = _cfg(**(base | change))
    assert rules_hash(canonical_rules(changed)) != rules_hash(canonical_rules(_cfg(**base)))


@pytest.mark.parametrize("game", sorted(GAMES))
def test_inverse_round_trips_every_games_default_options(game: str) -> None:
    cfg = RulesConfig(game=game)
    text = canonical_rules(cfg)
    rules = rules_from_canonical("T9", text, "1.2.3", games=game_class)
    assert rules.table_id == "T9" and rules.game.name == game and rules.canonical == text
    assert rules.rules_hash == rules_hash(text) and rules.software_version == "1.2.3"
    assert rules.game.options == GAMES[game].Options()
    assert canonical_rules(parse_canonical(text, games=game_class), game_class) == text
    assert (rules.decision_ms, rules.action_ms, rules.alert_after) == (15_000, 20_000, 3)


def test_inverse_keeps_limits_money_and_timers() -> None:
    text = canonical_rules(_cfg(currency="KRW", minor_unit="1", rounding="HALF_UP", decision_seconds=7.5,
                                limits={"tie": {"min": "10", "max": "5000"}}, options={"deal_order": "BLOCK"}))
    r = rules_from_canonical("T1", text, games=game_class)
    assert r.currency == "KRW" and r.minor_unit == Decimal(1) and r.rounding.value == "HALF_UP"
    assert r.decision_ms == 7500 and r.limits["tie"].max == Decimal(5000) and r.game.options.deal_order == "BLOCK"


@pytest.mark.parametrize("bad", ["not json", "[]", '{"format":2,"game":"stud"}',
                                 '{"format":1,"game":"nope"}', ' {"format":1,"game":"stud"}'])
def test_invalid_or_non_canonical_text_is_refused(bad: str) -> None:
    with pytest.raises(RulesError):
        rules_from_canonical("T1", bad, games=game_class)
    text = canonical_rules(RulesConfig(game="stud")).replace('"seats":8', '"seats":99')
    with pytest.raises(RulesError, match="do not validate"):
        rules_from_canonical("T1", text, games=game_class)


def test_software_version_comes_from_package_metadata() -> None:
    from importlib.metadata import version

    assert software_version() == version("live-dealer-backend")


def test_rules_event_checks_its_hash_and_sets_the_next_rounds_rules() -> None:
    from dealer.core.events import OpenRound

    old = canonical_rules(_cfg())
    new = canonical_rules(_cfg(options={"deal_order": "BLOCK"}))
    with pytest.raises(ValueError, match="SHA-256"):
        RulesChanged(rules=new, rules_hash=rules_hash(old), software_version="1")
    ev = RulesChanged(rules=new, rules_hash=rules_hash(new), software_version="1")
    assert EVENT_ADAPTER.validate_json(ev.model_dump_json()) == ev
    table = Table(rules_from_canonical("T1", old, "1", games=game_class))
    assert table.handle(OpenRound(round_id="T1-000001")).accepted
    step = table.handle(ev)
    assert step.accepted and step.journal and table.journaled_rules == (rules_hash(new), "1")
    assert table.current.rules.rules_hash == rules_hash(old)  # the round in play keeps its rules
    assert table.rules.rules_hash == rules_hash(new)


def test_the_canonical_bytes_do_not_drift() -> None:
    """Pinned: a change here changes every table's rules hash (a new rules event at the next
    start). Update it only together with a real change of the effective rules or their form."""
    text = canonical_rules(RulesConfig(game="teen-patti"))
    assert text.startswith('{"action_seconds":20.0,"alert_after":3,"betting_seconds":15.0,"currency":"EUR",'
                           '"decision_seconds":15.0,"format":1,"game":"teen-patti","limits":{},"minor_unit":"0.01",'
                           '"options":{')
    assert rules_hash(text) == "e938048e29c0b006034abd1e6c0c71bceab6695878c1079391832d309cfcdadf"
