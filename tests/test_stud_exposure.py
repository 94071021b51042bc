"""Seven-Card Stud at the table (pure: ``Table.handle`` with plain events): the window in which
the station may report an exposed 7th card (`seven-card-stud.md` §3.5), and the wash count by
hands actually dealt (§1).

The last 7th card used to open 7th-street betting on its scan, so its exposure could never be
reported (the hand refuses one once the betting is open). Now a timed confirmation
``LAST_CARD`` follows the 7th cards: the station reports an exposure (``card_exposed``) in the
window, then confirms, or the window runs out (``confirm_timeout``, from the service's timer).

The station's word alone shows no hidden card (issue 29): its report waits, shown to nobody,
with the window standing still, until a supervisor's act (``supervisor_expose``) names the seat
and the card registered there; only a 7th card, only before the 7th-street betting, one card
per act. Anything else is refused and changes nothing.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from dealer.core.cards import STANDARD_52
from dealer.edge.config import RulesConfig
from dealer.core.events import (
    CardExposed,
    CloseBetting,
    ConfirmTimeout,
    DealerConfirm,
    LinkDown,
    LinkUp,
    OpenRound,
    PlaceBet,
    PlayerAction,
    ScanRead,
    SupervisorExpose,
)
from dealer.games.stud import WASH_KEY, Stud
from dealer.core.messages import RoundEvent, StationPrompt
from dealer.core.round import Phase, Step, TableRules
from dealer.core.rules import RulesError, canonical_rules, rules_from_canonical, rules_hash
from dealer.games import game_class
from dealer.core.table import Table
from dealer.core.visibility import PUBLIC, Visibility, leaks, view

# Up cards: seat 2 shows a pair of aces from 4th street, so without an exposure it opens 7th street.
UPS = {"P1.3": "3C", "P1.4": "7D", "P1.5": "9H", "P1.6": "JS",
       "P2.3": "AS", "P2.4": "AH", "P2.5": "5D", "P2.6": "6C",
       "P4.3": "4C", "P4.4": "8S", "P4.5": "TD", "P4.6": "QH"}


class Stud7:
    """One stud table driven by events: seats 1, 2 and 4 (players p1, p2, p4), everyone checks
    (or brings in the minimum, or calls) up to the step asked for."""

    def __init__(self, **options: Any) -> None:
        self.t = Table(TableRules(table_id="T1", game=Stud.from_options(options), action_ms=10_000))
        self.at = 1_000
        self.effects: list[Any] = []
        self.journal: list[Any] = []
        self.seq = 0

    def feed(self, ev: Any) -> Step:
        step = self.t.handle(ev)
        self.effects += step.effects
        if step.journal:
            self.journal.append(ev)
        return step

    def tick(self) -> int:
        self.at += 10
        return self.at

    @property
    def r(self):
        return self.t.current

    def open(self, seats: tuple[int, ...] = (1, 2, 4)) -> None:
        self.seq += 1
        rid = f"T1-{self.seq:06d}"
        assert self.feed(OpenRound(round_id=rid, at=self.tick(), context=self.t.memory)).accepted
        for s in seats:
            assert self.feed(PlaceBet(bet_id=f"{rid}-{s}", player_id=f"p{s}", bet_type="chips", stake="50.00",
                                      seat=s, at=self.tick())).accepted
        self.feed(CloseBetting(at=self.tick()))
        self.deck = [c for c in STANDARD_52 if c not in UPS.values()]

    def confirms(self) -> list[str]:
        return [p.name for p in self.r.plan if p.confirm]

    def play_to(self, stop: str) -> None:
        """Deal and bet passively until the expected step is ``stop`` ("end": the result)."""
        r = self.r
        while r.phase in (Phase.BETTING_CLOSED, Phase.DEALING, Phase.ACTION):
            if r.phase == Phase.ACTION:
                o = r.hand.betting.options()
                action = "CHECK" if o.check else "BRING_IN" if o.forced else "CALL"
                amount = o.bet.min if action == "BRING_IN" else None
                assert self.feed(PlayerAction(player_id=o.player_id, action=action, amount=amount,
                                              at=self.tick())).accepted
                continue
            pos = r.plan[r.next_index]
            if pos.name == stop:
                return
            if pos.confirm:
                assert self.feed(DealerConfirm(step=pos.name, at=self.tick())).accepted
            else:
                code = UPS.get(pos.name) or self.deck.pop(0)
                assert self.feed(ScanRead(reader="R", code=code, at=self.tick())).accepted
        assert stop == "end", f"the hand ended before {stop}"

    def expose(self, seat: int, card: str | None = None) -> Step:
        """The supervisor's signed act (here: its event) naming seat ``seat``'s 7th card."""
        code = card if card is not None else self.r.cards[f"P{seat}.7"]
        return self.feed(SupervisorExpose(supervisor="sup-ana", seat=seat, card=code, round_id=self.r.round_id,
                                          command_id=f"x-{self.tick()}", at=self.at))

    def shown(self, *positions: str) -> list[str]:
        """The positions among ``positions`` the public may see now."""
        seen = view(self.r)
        return [p for p in positions if seen[p].visibility == Visibility.PUBLIC]

    def events(self, name: str) -> list[RoundEvent]:
        return [e for e in self.effects if isinstance(e, RoundEvent) and e.event == name]

    def prompts(self) -> list[StationPrompt]:
        return [e for e in self.effects if isinstance(e, StationPrompt)]


def rejected(step: Step) -> str:
    assert not step.accepted and step.rejection is not None
    return step.rejection.reason


# -- §3.5: the window before 7th-street betting -------------------------------------------------


def test_the_last_7th_card_opens_a_window_not_the_betting():
    s = Stud7()
    s.open()
    s.play_to("LAST_CARD")
    r = s.r
    assert r.phase == Phase.DEALING and r.expected_position == "LAST_CARD" and r.street == "6th"
    assert [p.name for p in r.plan[-5:]] == ["BURN4", "P1.7", "P2.7", "P4.7", "LAST_CARD"]
    registered = s.events("card_registered")[-1]
    window = s.events("confirm_window")[-1]
    assert registered.data["position"] == "P4.7" and window.at == registered.at
    assert window.data == {"step": "LAST_CARD", "closes_at": registered.at + 5_000}
    assert r.confirm_deadline == registered.at + 5_000
    prompt = s.prompts()[-1]
    assert (prompt.kind, prompt.position) == ("CONFIRM", "LAST_CARD")
    assert "exposed" in prompt.message and "5 s" in prompt.message
    assert r.hand.to_act is None  # nobody is on the clock: no turn while the window is open


def test_the_last_dealt_7th_card_plays_up_once_the_supervisor_confirms_the_station_s_report():
    s = Stud7()
    s.open()
    s.play_to("LAST_CARD")
    card, window = s.r.cards["P4.7"], s.r.confirm_deadline
    step = s.feed(CardExposed(position="P4.7", round_id=s.r.round_id, at=s.tick()))
    assert step.accepted and step.journal
    # the station's word alone: reported, journaled, shown to nobody; the window stands still
    assert not s.events("card_exposed") and s.shown("P4.7") == []
    assert s.events("exposure_reported")[-1].data == {"position": "P4.7", "waiting_for": "supervisor"}
    assert [leaks(s.r, PUBLIC, e) for e in step.effects] == [[], [], []]
    alert, prompt = step.effects[1:]
    assert alert.kind == "ALERT" and alert.reason == "exposure_reported"
    assert f"dealer supervisor expose T1 {s.r.round_id} --seat 4 --card CODE" in alert.message
    assert prompt.kind == "CONFIRM" and prompt.position == "LAST_CARD" and "waiting for a supervisor" in prompt.message
    assert s.r.confirm_deadline is None and s.r.exposure_reports == ["P4.7"]
    assert "stands still" in rejected(s.feed(ConfirmTimeout(step="LAST_CARD", deadline=window, at=window)))
    # the supervisor names the seat and the card it sees: now it plays face up
    step = s.expose(4)
    assert step.accepted and step.journal
    assert s.events("card_exposed")[-1].data == {"position": "P4.7", "card": card, "supervisor": "sup-ana"}
    assert s.shown("P4.7") == ["P4.7"] and s.r.exposure_reports == []
    # no report waits any more: the window starts again whole, then runs out
    assert s.events("confirm_window")[-1].data == {"step": "LAST_CARD", "closes_at": s.at + 5_000, "resumed": True}
    step = s.feed(ConfirmTimeout(step="LAST_CARD", deadline=s.r.confirm_deadline, at=s.r.confirm_deadline))
    assert step.accepted and step.journal
    assert s.events("dealer_confirmed")[-1].data == {"step": "LAST_CARD", "by": "timer"}
    opened = s.events("betting_round_opened")[-1]
    assert opened.data["street"] == "7th" and opened.data["first"] == "p4"
    assert "P4 exposed the last card" in opened.data["announce"]
    assert s.r.phase == Phase.ACTION and s.r.hand.to_act == "p4" and s.r.confirm_deadline is None
    s.play_to("end")  # to the showdown
    res = s.r.result
    assert res.details["exposed"] == ["P4.7"] and res.cards["P4.7"] == card


def test_a_station_reporting_every_7th_card_exposed_shows_none_of_them():
    """The re-audit's finding: a station reported ``card_exposed`` for every seat's 7th card and
    all were published. Now none is shown until a supervisor confirms it, and a station that
    goes on without the supervisor leaves them face down, the betting opened as without them."""
    s = Stud7()
    s.open()
    s.play_to("LAST_CARD")
    sevenths = ["P1.7", "P2.7", "P4.7"]
    for pos in sevenths:
        step = s.feed(CardExposed(position=pos, round_id=s.r.round_id, at=s.tick()))
        assert step.accepted and all(leaks(s.r, PUBLIC, e) == [] for e in step.effects)
    assert s.shown(*sevenths) == [] and not s.events("card_exposed") and s.r.exposure_reports == sevenths
    assert "reported already" in rejected(s.feed(CardExposed(position="P1.7", at=s.tick())))
    assert all(view(s.r)[p].visibility == Visibility.OWNER for p in sevenths)  # each its owner's only
    assert s.r.confirm_deadline is None  # no timer closes the window while they wait
    step = s.feed(DealerConfirm(step="LAST_CARD", round_id=s.r.round_id, at=s.tick()))
    assert step.accepted and s.events("dealer_confirmed")[-1].data == {"step": "LAST_CARD", "unconfirmed": sevenths}
    assert s.r.exposure_reports == [] and s.shown(*sevenths) == [] and s.r.hand.exposed == []
    assert s.r.hand.to_act == "p2"  # the high hand showing opens, as if nothing was reported
    assert "before the 7th-street betting opens" in rejected(s.expose(4))


def test_the_supervisor_s_act_is_refused_unless_it_confirms_a_reported_7th_card_as_registered():
    s = Stud7()
    s.open()
    assert "not dealing" in rejected(s.feed(SupervisorExpose(supervisor="sup-ana", seat=4, card="5C", at=s.tick())))
    s.play_to("P2.7")
    assert "P2.7 has not been dealt" in rejected(s.expose(2, "2C"))
    s.play_to("LAST_CARD")
    card = s.r.cards["P4.7"]
    wrong = next(c for c in STANDARD_52 if c != card and c not in s.r.cards.values())
    assert "has not reported P4.7 exposed" in rejected(s.expose(4))  # the supervisor alone: no
    assert "P3.7 has not been dealt" in rejected(s.expose(3, "2C"))  # seat 3 sits out
    s.feed(CardExposed(position="P4.7", at=s.tick()))
    # a card the supervisor names that is not the one registered there: refused, never named
    other = rejected(s.expose(4, wrong))
    assert "not the card registered at P4.7" in other and card not in other and wrong not in other
    assert "has not reported P1.7 exposed" in rejected(s.expose(1))
    assert s.r.exposure_reports == ["P4.7"] and s.r.hand.exposed == [] and s.shown("P4.7") == []
    assert s.expose(4).accepted
    assert "P4.7 is face up already" in rejected(s.expose(4))
    assert "P4.7 is face up already" in rejected(s.feed(CardExposed(position="P4.7", at=s.tick())))
    # any card but a 7th: the rulebook's §5.4 irregularity, the station's and the supervisor's alike
    assert "only a 7th card may be exposed" in rejected(s.feed(CardExposed(position="P1.3", at=s.tick())))
    assert s.r.hand.exposed == [4] and len(s.events("card_exposed")) == 1


def test_a_report_during_the_7th_street_deal_holds_the_window_until_the_supervisor_decides():
    s = Stud7()
    s.open()
    s.play_to("P4.7")
    assert s.feed(CardExposed(position="P1.7", at=s.tick())).accepted  # dealt earlier in the street
    assert "waiting for a supervisor" in s.prompts()[-1].message and s.prompts()[-1].position == "P4.7"
    s.feed(ScanRead(reader="R", code=s.deck.pop(0), at=s.tick()))  # the last 7th card: no timed window
    assert s.r.expected_position == "LAST_CARD" and s.r.confirm_deadline is None
    assert not s.events("confirm_window") and "waiting for a supervisor" in s.prompts()[-1].message
    assert s.expose(1).accepted
    assert s.r.confirm_deadline == s.at + 5_000 and s.events("confirm_window")[-1].data["resumed"] is True
    assert s.feed(ConfirmTimeout(step="LAST_CARD", at=s.tick())).accepted
    assert s.r.hand.to_act == "p1"  # the exposed P1.7 opens


def test_rules_journaled_before_exposures_needed_the_supervisor_replay_the_station_s_word():
    today = json.loads(canonical_rules(RulesConfig(game="stud")))
    assert today["options"]["exposure_corroboration"] == "SUPERVISOR"
    del today["options"]["exposure_corroboration"]
    old = json.dumps(today, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    rules = rules_from_canonical("T1", old, "0.1.0", games=game_class)
    assert rules.game.options.exposure_corroboration == "NONE" and rules.game.options.exposure_window_seconds == 5
    s = Stud7()
    s.t = Table(rules)
    s.open()
    s.play_to("LAST_CARD")
    assert s.feed(CardExposed(position="P4.7", at=s.tick())).accepted
    assert s.events("card_exposed")[-1].data == {"position": "P4.7", "card": s.r.cards["P4.7"]}
    # a table's configuration cannot ask for it
    from pydantic import ValidationError

    from dealer.edge.config import TableConfig

    with pytest.raises(ValidationError, match="a hidden card is never shown on the station's word alone"):
        TableConfig(id="T1", game="stud", options={"exposure_corroboration": "NONE"},
                    scanner={"kind": "serial", "port": "/dev/null", "reader_id": "R"})


def test_the_station_closes_the_window_early_and_an_exposure_after_it_is_refused():
    s = Stud7()
    s.open()
    s.play_to("LAST_CARD")
    assert s.feed(DealerConfirm(step="LAST_CARD", round_id=s.r.round_id, at=s.tick())).accepted
    assert s.events("dealer_confirmed")[-1].data == {"step": "LAST_CARD"}
    assert s.r.phase == Phase.ACTION and s.r.hand.to_act == "p2"  # the high hand showing, as on 6th street
    assert "before the 7th-street betting opens" in rejected(s.feed(CardExposed(position="P4.7", at=s.tick())))
    late = s.feed(ConfirmTimeout(step="LAST_CARD", at=s.tick()))  # the timer lost the race: changes nothing
    assert not late.accepted and s.r.hand.to_act == "p2"


def test_a_timeout_for_another_step_and_a_confirmation_before_the_window_are_refused():
    s = Stud7()
    s.open()
    s.play_to("P2.7")
    assert "no window" in rejected(s.feed(ConfirmTimeout(step="LAST_CARD", at=s.tick())))
    assert "cannot confirm LAST_CARD" in rejected(s.feed(DealerConfirm(step="LAST_CARD", at=s.tick())))
    assert s.feed(CardExposed(position="P1.7", at=s.tick())).accepted  # dealt earlier in the street: as before
    assert s.expose(1).accepted
    s.play_to("LAST_CARD")
    assert "no window of SHUFFLE" in rejected(s.feed(ConfirmTimeout(step="SHUFFLE", at=s.tick())))
    assert s.feed(ConfirmTimeout(step="LAST_CARD", at=s.tick())).accepted
    assert s.r.hand.to_act == "p1"  # the exposed P1.7 (the first in deal order) opens


def test_the_window_waits_while_the_broker_is_down_and_starts_again_when_it_is_back():
    s = Stud7()
    s.open()
    s.play_to("LAST_CARD")
    s.feed(LinkDown(link="broker", reason="test", at=s.tick()))
    assert "paused" in rejected(s.feed(ConfirmTimeout(step="LAST_CARD", at=s.tick())))
    back = s.tick()
    step = s.feed(LinkUp(link="broker", at=back))
    assert step.accepted and step.journal
    assert s.r.confirm_deadline == back + 5_000
    resumed = s.events("confirm_window")[-1]
    assert resumed.data == {"step": "LAST_CARD", "closes_at": back + 5_000, "resumed": True}
    assert s.prompts()[-1].position == "LAST_CARD"
    # a timer armed for the window's old deadline (queued behind the resume) does not close it
    assert "stale" in rejected(s.feed(ConfirmTimeout(step="LAST_CARD", deadline=back - 1, at=s.tick())))
    assert s.feed(CardExposed(position="P2.7", at=s.tick())).accepted
    assert "stands still" in rejected(s.feed(ConfirmTimeout(step="LAST_CARD", deadline=back + 5_000, at=back + 5_000)))
    assert s.expose(2).accepted
    assert s.feed(ConfirmTimeout(step="LAST_CARD", deadline=s.at + 5_000, at=s.at + 5_000)).accepted
    assert s.r.hand.to_act == "p2"


def test_replaying_the_journal_takes_the_same_steps_at_the_same_deadlines():
    s = Stud7()
    s.open()
    s.play_to("LAST_CARD")
    s.feed(LinkDown(link="broker", at=s.tick()))
    s.feed(LinkUp(link="broker", at=s.tick()))
    s.feed(CardExposed(position="P4.7", at=s.tick()))
    s.feed(CardExposed(position="P2.7", at=s.tick()))
    assert not s.expose(2, "2C").accepted  # refused: not journaled
    s.expose(4)
    s.feed(ConfirmTimeout(step="LAST_CARD", at=s.tick()))  # P2.7 still waits: refused
    s.feed(DealerConfirm(step="LAST_CARD", at=s.tick()))  # ... and stays down
    s.play_to("end")
    assert [type(ev).__name__ for ev in s.journal].count("SupervisorExpose") == 1
    fresh = Table(TableRules(table_id="T1", game=Stud.from_options({}), action_ms=10_000))
    for ev in s.journal:
        assert fresh.handle(ev).accepted, ev
    assert fresh.current.result == s.r.result and fresh.current.hand.exposed == [4]
    assert fresh.memory == s.t.memory


def test_no_window_when_the_7th_card_is_the_community_card_or_the_option_is_zero():
    # 8 players: the single card left is COMM, face up for everyone: nothing to expose
    s = Stud7()
    s.open(seats=(1, 2, 3, 4, 5, 6, 7, 8))
    s.play_to("COMM")
    s.feed(ScanRead(reader="R", code=s.deck.pop(0), at=s.tick()))
    assert s.r.phase == Phase.ACTION and "LAST_CARD" not in s.confirms() and s.r.confirm_deadline is None
    # exposure_window_seconds = 0: the old behaviour, the betting opens on the last scan
    z = Stud7(exposure_window_seconds=0)
    z.open()
    z.play_to("P4.7")
    z.feed(ScanRead(reader="R", code=z.deck.pop(0), at=z.tick()))
    assert z.r.phase == Phase.ACTION and "LAST_CARD" not in z.confirms() and not z.events("confirm_window")
    assert "before the 7th-street betting opens" in rejected(z.feed(CardExposed(position="P4.7", at=z.tick())))


def test_a_custom_window_length_is_in_the_deadline_and_the_prompt():
    s = Stud7(exposure_window_seconds=2.5)
    s.open()
    s.play_to("LAST_CARD")
    assert s.r.confirm_deadline == s.events("card_registered")[-1].at + 2_500
    assert "2.5 s" in s.prompts()[-1].message


# -- §1: wash every 3 hands actually dealt --------------------------------------------------------


def test_a_round_cancelled_before_its_first_card_is_no_hand_for_the_wash_count():
    s = Stud7()
    washes = []
    for n in range(1, 8):
        if n in (2, 5):  # cancelled before the first card: one player only, or a link loss
            if n == 2:
                s.open(seats=(1,))
                assert s.r.phase == Phase.CANCELLED
            else:
                s.open()
                washes.append((n, "WASH" in s.confirms()))
                s.feed(LinkDown(link="scanner:R", reason="test", at=s.tick()))
                assert s.r.phase == Phase.CANCELLED
                s.feed(LinkUp(link="scanner:R", at=s.tick()))
            continue
        s.open()
        washes.append((n, "WASH" in s.confirms()))
        s.play_to("end")
        assert s.r.phase == Phase.RESULT
    # dealt hands: rounds 1, 3, 4 | 6, 7 -> a wash is due before the 4th hand dealt: round 5
    # asks for it but is cancelled before the wash, so round 6 asks again and washes. By round
    # number the washes would have come before rounds 1, 4 and 7.
    assert washes == [(1, True), (3, False), (4, False), (5, True), (6, True), (7, False)]
    assert s.t.memory == {WASH_KEY: 2}


def test_a_wash_confirmed_in_a_round_cancelled_before_its_first_card_counts():
    s = Stud7()
    s.open()
    assert s.confirms() == ["WASH", "SHUFFLE"]
    s.feed(DealerConfirm(step="WASH", at=s.tick()))
    s.feed(LinkDown(link="scanner:R", reason="test", at=s.tick()))
    assert s.r.phase == Phase.CANCELLED and s.t.memory == {WASH_KEY: 0}
    s.feed(LinkUp(link="scanner:R", at=s.tick()))
    s.open()
    assert s.confirms() == ["SHUFFLE"]  # the cards were washed; no hand was dealt since


def test_a_new_table_washes_first_and_a_voided_hand_that_was_dealt_counts():
    from dealer.core.events import SupervisorVoid

    s = Stud7(wash_every=2)
    assert s.t.memory == {WASH_KEY: None}
    s.open()
    assert s.r.context == {WASH_KEY: None} and s.confirms()[0] == "WASH"
    s.play_to("P4.3")
    s.feed(SupervisorVoid(supervisor="sup", reason="misdeal", at=s.tick()))
    assert s.r.phase == Phase.VOID and s.t.memory == {WASH_KEY: 1}
    s.open()
    assert s.confirms() == ["SHUFFLE"]
    s.play_to("end")
    s.open()
    assert s.confirms() == ["WASH", "SHUFFLE"]


@pytest.mark.parametrize("seq, wash", [(1, True), (2, False), (3, False), (4, True), (7, True), (8, False)])
def test_a_round_journaled_before_hands_were_counted_keeps_the_round_number_rule(seq, wash):
    t = Table(TableRules(table_id="T1", game=Stud.from_options({}), action_ms=10_000))
    rid = f"T1-{seq:06d}"
    t.handle(OpenRound(round_id=rid, at=1, context={}))  # an old journal's context: no count in it
    for s in (1, 2):
        t.handle(PlaceBet(bet_id=f"b{s}", player_id=f"p{s}", bet_type="chips", stake="5.00", seat=s, at=2))
    t.handle(CloseBetting(at=3))
    assert ("WASH" in [p.name for p in t.current.plan if p.confirm]) == wash


# -- rules journaled before the window existed ----------------------------------------------------


def test_stud_rules_journaled_before_the_window_option_replay_without_a_window():
    today = canonical_rules(RulesConfig(game="stud"))
    doc = json.loads(today)
    assert doc["options"]["exposure_window_seconds"] == 5.0
    del doc["options"]["exposure_window_seconds"]
    old = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    rules = rules_from_canonical("T1", old, "0.1.0", games=game_class)
    assert rules.canonical == old and rules.rules_hash == rules_hash(old) != rules_hash(today)
    assert rules.game.options.exposure_window_seconds == 0
    # still canonical only in its own form: any other change is refused as before
    with pytest.raises(RulesError, match="canonical form"):
        rules_from_canonical("T1", old.replace('":', '": ', 1), games=game_class)
    with pytest.raises(RulesError, match="canonical form"):
        rules_from_canonical("T1", old.replace('{"ante"', '{"exposure_window_seconds":0.0,"ante"'), games=game_class)
    # other games know no such legacy option
    tp = json.loads(canonical_rules(RulesConfig(game="teen-patti")))
    assert "exposure_window_seconds" not in tp["options"]
    assert Decimal(doc["options"]["ante"]) == 0


def test_no_window_when_nobody_is_left_to_bet_on_7th_street():
    """Heads-up with one player all-in: the rest is dealt without betting, the exposure would
    decide nothing (the card plays either way), so the hand ends on the last scan."""
    s = Stud7()
    s.seq += 1
    rid = f"T1-{s.seq:06d}"
    s.feed(OpenRound(round_id=rid, at=s.tick(), context=s.t.memory))
    s.feed(PlaceBet(bet_id="a", player_id="p1", bet_type="chips", stake="50.00", seat=1, at=s.tick()))
    s.feed(PlaceBet(bet_id="b", player_id="p2", bet_type="chips", stake="1.00", seat=2, at=s.tick()))
    s.feed(CloseBetting(at=s.tick()))
    s.deck = [c for c in STANDARD_52 if c not in UPS.values()]
    s.play_to("P2.3")
    s.feed(ScanRead(reader="R", code=UPS["P2.3"], at=s.tick()))
    o = s.r.hand.betting.options()
    assert o.player_id == "p1"  # the 3 of clubs is low
    s.feed(PlayerAction(player_id="p1", action="BRING_IN", amount=Decimal("0.50"), at=s.tick()))
    s.feed(PlayerAction(player_id="p2", action="ALL_IN", at=s.tick()))
    s.feed(PlayerAction(player_id="p1", action="CALL", at=s.tick()))
    s.play_to("end")
    assert s.r.phase == Phase.RESULT and "LAST_CARD" not in s.confirms() and not s.events("confirm_window")


def test_after_a_backend_restart_the_window_starts_again_whole():
    """The journal replays the hand up to the open window; the start-up Resume gives the
    station the whole window again (the old deadline passed while the backend was down)."""
    from dealer.core.events import Resume

    s = Stud7()
    s.open()
    s.play_to("LAST_CARD")
    fresh = Table(TableRules(table_id="T1", game=Stud.from_options({}), action_ms=10_000))
    for ev in s.journal:
        assert fresh.handle(ev).accepted, ev
    r = fresh.current
    assert r.expected_position == "LAST_CARD" and r.confirm_deadline == s.r.confirm_deadline
    assert r.prompt_now(s.tick()).position == "LAST_CARD"
    up = s.r.confirm_deadline + 60_000
    step = fresh.handle(Resume(link=None, at=up))
    assert step.accepted and step.journal and r.confirm_deadline == up + 5_000
    assert [e.data for e in step.effects if isinstance(e, RoundEvent)] == [
        {"step": "LAST_CARD", "closes_at": up + 5_000, "resumed": True}]
    assert fresh.handle(CardExposed(position="P4.7", at=up + 100)).accepted
    assert r.confirm_deadline is None
    # a restart while the report waits: it still waits, shown to nobody, the window standing still
    again = Table(TableRules(table_id="T1", game=Stud.from_options({}), action_ms=10_000))
    for ev in s.journal + [Resume(link=None, at=up), CardExposed(position="P4.7", at=up + 100)]:
        assert again.handle(ev).accepted, ev
    later = up + 60_000
    step = again.handle(Resume(link=None, at=later))
    assert step.accepted and not step.journal and again.current.confirm_deadline is None
    assert again.current.prompt_now(later).message.startswith("P4.7 reported exposed, waiting for a supervisor")
    assert fresh.handle(SupervisorExpose(supervisor="sup-ana", seat=4, card=r.cards["P4.7"], at=up + 200)).accepted
    assert fresh.handle(ConfirmTimeout(step="LAST_CARD", at=up + 5_200)).accepted
    assert r.hand.to_act == "p4"
