"""Burn reads in the pure round machine (docs/scanner-protocol.md §10.4): plain calls, no IO."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dealer.core.cards import STANDARD_52
from dealer.core.events import EVENT_ADAPTER, CloseBetting, OpenRound, PlaceBet, ScanRead
from dealer.games.teen_patti import TeenPatti
from dealer.core.messages import RoundEvent, RoundResult, StationPrompt
from dealer.core.round import TableRules
from dealer.core.table import Table

DEAL = ["AS", "KS", "AD", "KH", "AC", "KC"]


def dealing_table(burn_cards: int = 0) -> Table:
    t = Table(TableRules(table_id="T1", game=TeenPatti.from_options({"burn_cards": burn_cards})))
    assert t.handle(OpenRound(round_id="T1-000001", at=1)).accepted
    assert t.handle(PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="10", at=2)).accepted
    assert t.handle(CloseBetting(at=3)).accepted
    return t


def scan(code: str, burn: bool = False) -> ScanRead:
    return ScanRead(reader="SC1", code=code, burn=burn, at=10)


def events(step, name: str) -> list[RoundEvent]:
    return [e for e in step.effects if isinstance(e, RoundEvent) and e.event == name]


def test_a_burn_outside_the_plan_is_set_aside_journaled_and_never_shown() -> None:
    t = dealing_table()
    step = t.handle(scan("9D", burn=True))
    assert step.accepted and step.journal  # journaled: the read (with its code) is in the journal only
    assert [e.data for e in events(step, "card_burned")] == [{"expected": "A1", "count": 1}]
    [prompt] = [e for e in step.effects if isinstance(e, StationPrompt)]
    assert (prompt.kind, prompt.position, prompt.message) == ("NEXT", "A1", "burn card set aside, not dealt: deal A1 "
                                                                               "(face up)")
    assert "9D" not in "".join(e.model_dump_json() for e in step.effects)
    cur = t.current
    assert cur.cards == {} and cur.expected_position == "A1" and cur.set_aside == {"9D": 0}
    # the burned card cannot come back as a dealt one, and is still not named
    again = t.handle(scan("9D"))
    [rejected] = events(again, "scan_rejected")
    assert rejected.data["reason"] == "duplicate_card" and rejected.data["detail"] == "a card already burned"
    assert t.handle(scan("9D", burn=True)).effects[0].data["reason"] == "duplicate_card"  # nor be burned twice
    step = None
    for code in DEAL:
        step = t.handle(scan(code))
    result = next(e for e in step.effects if isinstance(e, RoundResult))
    assert result.cards == dict(zip(["A1", "B1", "A2", "B2", "A3", "B3"], DEAL))  # never a hand card


def test_a_burn_at_a_burn_position_registers_there() -> None:
    t = dealing_table(burn_cards=1)
    assert t.current.expected_position == "BURN1"
    step = t.handle(scan("9D", burn=True))
    [reg] = events(step, "card_registered")
    assert reg.data == {"position": "BURN1", "step": 1, "card": None}
    assert t.current.cards == {"BURN1": "9D"} and t.current.set_aside == {}
    # a dealt card already registered, burned: a duplicate, not a second burn
    step = t.handle(scan("AS"))
    assert t.current.cards["A1"] == "AS"
    assert events(t.handle(scan("AS", burn=True)), "scan_rejected")[0].data["reason"] == "duplicate_card"


def test_a_game_read_at_a_burn_position_registers_there_too() -> None:
    t = dealing_table(burn_cards=1)
    t.handle(scan("9D"))
    assert t.current.cards == {"BURN1": "9D"}


def test_a_burn_read_journals_its_flag_and_a_plain_read_keeps_its_old_bytes() -> None:
    assert "burn" not in scan("AS").model_dump_json()
    assert EVENT_ADAPTER.validate_json(scan("AS", burn=True).model_dump_json()).burn is True
    assert EVENT_ADAPTER.validate_json('{"type":"scan_read","reader":"SC1","code":"AS","seq":null,"at":1}').burn is False


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(STANDARD_52[:12]), st.booleans()), max_size=20))
def test_replaying_the_journaled_reads_rebuilds_the_same_round(reads: list[tuple[str, bool]]) -> None:
    live, journal = dealing_table(), []
    for code, burn in reads:
        ev = scan(code, burn)
        if live.handle(ev).journal:
            journal.append(EVENT_ADAPTER.validate_json(ev.model_dump_json()))
    again = dealing_table()
    for ev in journal:
        again.handle(ev)
    a, b = live.current, again.current
    assert (a.cards, a.set_aside, a.next_index, a.phase) == (b.cards, b.set_aside, b.next_index, b.phase)
