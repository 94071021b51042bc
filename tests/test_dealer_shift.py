"""Who dealt which round (``dealer_logon``, ``dealer/core/shift.py``): pure calls on the core.

A dealer logs on at the station; every round from then names them in its result, a dealer change
mid-round names both, each dealer's cards, rescans and refused mistakes are counted for the
dealer who was dealing, the table keeps its last rounds for the screens, and a replay of the
journal (from any round the service replays from) rebuilds the same."""

from __future__ import annotations

from decimal import Decimal

from dealer.core.events import CloseBetting, DealerLogon, Event, OpenRound, PlaceBet, ResultDelivered, ScanRead
from dealer.core.messages import RoundEvent
from dealer.core.shift import KEEP_ROUNDS
from dealer.core.table import Table
from dealer.edge import ingress, topics
from dealer.edge.catchup import table_history, table_state
from dealer.edge.signing import SupervisorVerifier
from tests.harness_visibility import make_table

TP_DEAL = ["AS", "KS", "QS", "JS", "TS", "9S"]  # A1 B1 A2 B2 A3 B3: every card registers


class Run:
    """A Teen Patti table driven by plain calls; every accepted event is kept, as the journal would."""

    def __init__(self) -> None:
        self.t: Table = make_table("teen-patti", None)
        self.at = 1_000
        self.journal: list[Event] = []
        self.effects: list[object] = []

    def step(self, ev: Event) -> bool:
        self.at += 10
        ev = ev.model_copy(update={"at": self.at})
        step = self.t.handle(ev)
        self.effects += step.effects
        if step.journal:
            self.journal.append(ev)
        return step.accepted

    def open(self) -> str:
        rid = self.t.next_round_id()
        assert self.step(OpenRound(round_id=rid, dealer=self.t.dealer))  # as the service makes it
        return rid

    def play(self, codes: list[str], *, logon_after: int | None = None, who: str = "") -> str:
        rid = self.open()
        assert self.step(PlaceBet(bet_id=f"b-{rid}", player_id="ann", bet_type="player_a", stake=Decimal("10"),
                                  round_id=rid))
        assert self.step(CloseBetting(by="dealer", round_id=rid))
        for i, code in enumerate(codes):
            if logon_after is not None and i == logon_after:
                assert self.step(DealerLogon(dealer_id=who, command_id=f"st-{who}"))
            assert self.step(ScanRead(reader="SC1", code=code))
        assert self.t.current is not None and self.t.current.result is not None
        return rid

    def events(self, name: str) -> list[RoundEvent]:
        return [e for e in self.effects if isinstance(e, RoundEvent) and e.event == name]


def test_a_dealer_logs_on_and_every_result_names_who_dealt_it() -> None:
    r = Run()
    assert r.t.dealer is None
    assert r.step(DealerLogon(dealer_id="D-ann", command_id="c1"))
    assert [e.data for e in r.events("dealer_logged_on")] == [{"dealer_id": "D-ann", "previous": None}]
    assert not r.step(DealerLogon(dealer_id="D-ann", command_id="c2"))  # already on shift: refused, not journaled
    assert not r.step(DealerLogon(dealer_id="QH", command_id="c3"))  # reads as a card: the screens could not show it
    assert len(r.journal) == 1
    rid = r.play(TP_DEAL)
    res = r.t.current.result  # type: ignore[union-attr]
    assert res is not None and res.round_id == rid and res.dealers == ["D-ann"]
    assert '"dealers":["D-ann"]' in res.model_dump_json()


def test_a_round_dealt_with_nobody_logged_on_is_written_as_before() -> None:
    r = Run()
    r.play(TP_DEAL)
    res = r.t.current.result  # type: ignore[union-attr]
    assert res is not None and res.dealers == [] and "dealers" not in res.model_dump_json()


def test_a_dealer_change_mid_round_names_both_and_splits_the_figures() -> None:
    r = Run()
    r.step(DealerLogon(dealer_id="D-ann", command_id="c1"))
    rid = r.open()
    r.step(PlaceBet(bet_id="b1", player_id="p", bet_type="player_a", stake=Decimal("10"), round_id=rid))
    r.step(CloseBetting(by="dealer", round_id=rid))
    assert r.step(ScanRead(reader="SC1", code="AS"))
    assert r.step(ScanRead(reader="SC1", code="AS"))  # a duplicate: rescan, D-ann's mistake
    assert r.step(ScanRead(reader="SC1", code="XX"))  # not a card of this deck: a mistake too
    assert r.step(DealerLogon(dealer_id="D-bob", command_id="c2"))
    assert r.events("dealer_logged_on")[-1].data == {"dealer_id": "D-bob", "previous": "D-ann"}
    assert r.events("dealer_logged_on")[-1].round_id == rid  # told in the round in play
    for code in TP_DEAL[1:]:
        assert r.step(ScanRead(reader="SC1", code=code))
    assert r.t.current.result.dealers == ["D-ann", "D-bob"]  # type: ignore[union-attr]
    figures = {f.dealer: (f.rounds, f.tally.cards, f.tally.rescans, f.tally.mistakes)
               for f in r.t.shift.figures.values()}
    assert figures == {"D-ann": (1, 1, 2, 2), "D-bob": (1, 5, 0, 0)}
    line = r.t.shift.rounds[0]
    assert (line.round_id, line.dealers, line.dealt, line.rescans, line.mistakes) == (rid, ("D-ann", "D-bob"), 6, 2, 2)


def test_a_noread_is_a_rescan_but_not_the_dealers_mistake() -> None:
    from dealer.core.events import ReadFailed
    r = Run()
    r.step(DealerLogon(dealer_id="D-ann", command_id="c1"))
    rid = r.open()
    r.step(CloseBetting(by="dealer", round_id=rid))
    assert r.step(ReadFailed(reader="SC1", reason="noread"))
    fig = r.t.shift.figures  # nothing ended yet: the round holds its own tally
    assert fig["D-ann"].tally.rescans == 0
    tally = r.t.current.tally["D-ann"]  # type: ignore[union-attr]
    assert (tally.cards, tally.rescans, tally.mistakes) == (0, 1, 0)


def test_the_table_keeps_its_last_rounds_newest_first_and_bounded() -> None:
    r = Run()
    r.step(DealerLogon(dealer_id="D-ann", command_id="c1"))
    rids = [r.play(TP_DEAL) for _ in range(KEEP_ROUNDS + 3)]
    assert [x.round_id for x in r.t.shift.rounds] == rids[::-1][:KEEP_ROUNDS]
    assert r.t.shift.figures["D-ann"].rounds == KEEP_ROUNDS + 3  # the figures count every round


def test_a_replay_rebuilds_the_dealer_and_the_figures_also_from_a_later_round() -> None:
    r = Run()
    r.step(DealerLogon(dealer_id="D-ann", command_id="c1"))
    r.play(TP_DEAL)
    r.step(ResultDelivered(round_id=r.t.current.round_id, idempotency_key="k1"))  # type: ignore[union-attr]
    r.play(TP_DEAL, logon_after=2, who="D-bob")
    whole = make_table("teen-patti", None)
    for ev in r.journal:
        assert whole.handle(ev).accepted
    assert whole.dealer == "D-bob" and whole.shift.rounds == r.t.shift.rounds
    assert {d: f.tally for d, f in whole.shift.figures.items()} == {d: f.tally for d, f in r.t.shift.figures.items()}
    # the service replays from the oldest undelivered round: its OpenRound says who was dealing
    start = max(i for i, ev in enumerate(r.journal) if isinstance(ev, OpenRound))
    later = make_table("teen-patti", None)
    for ev in r.journal[start:]:
        assert later.handle(ev).accepted
    assert later.dealer == "D-bob" and later.current.result.dealers == ["D-ann", "D-bob"]  # type: ignore[union-attr]
    assert [x.round_id for x in later.shift.rounds] == [r.t.shift.rounds[0].round_id]


def test_the_state_and_history_carry_the_dealer_and_a_face_down_card_only_as_a_position() -> None:
    t = make_table("sevenluck", None)
    at = 100
    for ev in [DealerLogon(dealer_id="D-ann", command_id="c1"), OpenRound(round_id=t.next_round_id(), dealer="D-ann"),
               PlaceBet(bet_id="b1", player_id="ann", bet_type="ante", stake=Decimal("10"), seat=1),
               CloseBetting(by="dealer"), ScanRead(reader="SC1", code="2C")]:
        at += 10
        assert t.handle(ev.model_copy(update={"at": at})).accepted
    state = table_state(t, node_id="n", session="s.1", at=at)
    assert state.dealer == "D-ann" and state.dealt == ["P1.1"] and state.cards == {}  # a back, never "2C"
    assert "2C" not in state.model_dump_json()
    hist = table_history(t, node_id="n", session="s.1", at=at)
    assert hist.dealer == "D-ann" and [d.dealer for d in hist.dealers] == ["D-ann"] and hist.dealers[0].on_shift


class _NoSupervisors(SupervisorVerifier):
    def __init__(self) -> None:  # no keys: the station's commands never reach a verifier
        pass


def test_the_station_logs_a_dealer_on_without_a_round_and_nobody_else_may() -> None:
    def parse(topic: str, body: bytes) -> object:
        return ingress.parse(topic, body, tables={"T1"}, now_ms=5, supervisors=_NoSupervisors())

    ok = parse(topics.station("T1"), b'{"type":"dealer_logon","command_id":"st-1","dealer_id":"D-0042"}')
    assert isinstance(ok, ingress.Accepted) and isinstance(ok.event, DealerLogon) and ok.event.at == 5
    wrong = parse(topics.table_topic("T1", "actions"), b'{"type":"dealer_logon","command_id":"p-1","dealer_id":"D-1"}')
    assert isinstance(wrong, ingress.Refused) and wrong.kind == "wrong_role"
    no_id = parse(topics.station("T1"), b'{"type":"dealer_logon","dealer_id":"D-1"}')
    assert isinstance(no_id, ingress.Refused) and no_id.kind == "missing_command_id"
    bad = parse(topics.station("T1"), b'{"type":"dealer_logon","command_id":"st-2","dealer_id":"D 1/#"}')
    assert isinstance(bad, ingress.Refused) and bad.kind == "malformed"
