"""Disputes (issue 28): ``dealer recall`` by round id, time range and player from a journal
given by path (no configuration: the rules come from the journal's ``table_rules`` events),
``dealer hand --round`` re-evaluating a recorded round under the rules it was played with, and
the printable dispute report (``dealer recall --round ID --report``).

Every journal here is a real SQLite journal written by the real service (``Service`` on a
``LocalBus``, as tests/test_audit.py does), with a clock of the test's own so that rounds
happen at known instants; nothing is mocked."""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dealer.cli.main import main as dealer_main
from dealer.core.events import (CloseBetting, DealerConfirm, DealerLogon, PlaceBet, PlayerAction, PlayerDecision,
                                ReadFailed, ScanRead, SupervisorPause, SupervisorResume, SupervisorVoid)
from dealer.core.round import Phase
from dealer.edge.config import load_settings
from dealer.edge.service import Service
from drivers.bus import LocalBus
from tests.harness import DEAL
from tests.harness_cli import run_cli
from tools.audit import Selection, recall, recall_journal

pytestmark = pytest.mark.integration  # the CLI as a process, a few real services

#: 2027-01-15T08:00:00Z: the test clock's first instant (the journal's own commit times are real)
T0 = 1_800_000_000_000
HOUR = 3_600_000
#: a supervisor signature as the journal keeps it: submitted straight to the service here, so nobody
#: checked it (the report says whether a signature is present, never that it is valid)
SIG = "ab" * 32


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Clock:
    """The service's wall clock, moved by the test: every event's ``at`` is known."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        self.now += 1  # each event a millisecond after the last
        return self.now


TP, ST, SD, SL = "TP1", "ST1", "SD1", "SL1"


def studio_config(tmp: Path) -> Path:
    """Four tables on one SQLite journal (no broker; long windows, so no timer fires during a
    test; rounds opened by the test): Teen Patti, Seven-Card Stud, Seotda and Sevenluck."""
    path = tmp / "studio.toml"
    path.write_text(f"""
[service]
journal_path = "{tmp / 'journal.sqlite'}"
metrics_enabled = false

[[tables]]
id = "{TP}"
game = "teen-patti"
auto_rounds = false
[tables.scanner]
kind = "mqtt"
reader_id = "SC1"

[[tables]]
id = "{ST}"
game = "stud"
auto_rounds = false
action_seconds = 600
[tables.options]
seats = 3
[tables.scanner]
kind = "mqtt"
reader_id = "SC2"

[[tables]]
id = "{SD}"
game = "seotda"
auto_rounds = false
action_seconds = 600
currency = "KRW"
minor_unit = "1"
[tables.options]
stake = 10
seats = 3
[tables.scanner]
kind = "mqtt"
reader_id = "SC3"

[[tables]]
id = "{SL}"
game = "sevenluck"
auto_rounds = false
decision_seconds = 600
[tables.options]
seats = 2
[tables.scanner]
kind = "mqtt"
reader_id = "SC4"
""")
    return path


class Served:
    """The real service on a LocalBus with the test's clock, for ``async with``."""

    def __init__(self, cfg: Path, clock: Clock) -> None:
        self.service = Service(load_settings(cfg), bus=LocalBus(), broker_link=False, clock=clock)
        self.clock = clock
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> "Served":
        self.task = asyncio.create_task(self.service.run())
        await self.service.ready.wait()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    async def submit(self, table: str, ev: Any, accepted: bool = True) -> Any:
        step = await self.service.submit(table, ev)
        if accepted:
            assert step.accepted, (ev, step.effects)
        return step

    async def play_peer_round(self, table: str, reader: str, players: dict[str, tuple[int, str]], seed: int,
                              choose: Callable[[dict[str, Any], str], PlayerAction | None] | None = None) -> str:
        """Open a round of a peer game (stud, seotda), seat ``players`` (seat, chips), and play it
        to its result: the dealer confirms and scans cards at random (seeded), every player
        calls or checks (``choose`` may decide otherwise). Returns the round id."""
        rng = random.Random(seed)
        assert (await self.service.open_round(table)).accepted
        tbl = self.service.tables[table]
        rnd = tbl.current
        assert rnd is not None
        for p, (seat, chips) in players.items():
            await self.submit(table, PlaceBet(bet_id=f"{rnd.round_id}-{p}", player_id=p, bet_type="chips",
                                              stake=chips, seat=seat, round_id=rnd.round_id))
        await self.submit(table, CloseBetting(by="dealer"))
        deck = sorted(tbl.rules.game.deck)
        seq = 100
        for _ in range(2000):
            if rnd.phase not in (Phase.BETTING_CLOSED, Phase.DEALING, Phase.ACTION):
                return rnd.round_id
            if rnd.phase == Phase.ACTION and rnd.hand is not None:
                turn = rnd.hand.turn_options()
                actor = rnd.hand.to_act
                ev = choose(turn, actor) if choose is not None else None
                if ev is None:
                    ev = passive(turn, actor)
            elif rnd.plan[rnd.next_index].confirm:
                ev = DealerConfirm(step=rnd.plan[rnd.next_index].name)
            else:  # a card not yet in this shuffle (a Seotda rematch reshuffles the 20 cards)
                pos = rnd.plan[rnd.next_index]
                used = {rnd.cards[p.name] for p in rnd.plan if p.deck == pos.deck and p.name in rnd.cards}
                seq += 1
                ev = ScanRead(reader=reader, code=rng.choice([c for c in deck if c not in used]), seq=seq)
            await self.submit(table, ev)
        raise AssertionError(f"round {rnd.round_id} did not end ({rnd.phase})")


def passive(turn: dict[str, Any], actor: str) -> PlayerAction:
    """Call, else bet the minimum (Seotda: the BET button), else check; a choice: its first."""
    buttons = list(turn.get("buttons") or ())
    actions = list(turn.get("actions") or ())
    if "choice" in turn:
        return PlayerAction(player_id=actor, action=actions[0])
    if buttons:
        pick = next(b for b in ("CALL", "CHECK", "BET") if b in buttons) if {"CALL", "CHECK", "BET"} & set(buttons) \
            else buttons[0]
        return PlayerAction(player_id=actor, action=pick)
    if "BRING_IN" in actions:
        return PlayerAction(player_id=actor, action="BRING_IN", amount=turn["bet"]["min"])
    for a in ("CALL", "CHECK"):
        if a in actions:
            return PlayerAction(player_id=actor, action=a)
    return PlayerAction(player_id=actor, action=actions[0])


# --- the journal every test reads ------------------------------------------------------------------

TP_BLIND = ["2C", "KS", "3D", "KH", "5H", "9C"]  # A: 5-3-2 high card, B: a pair of kings


async def play_studio(cfg: Path) -> dict[str, Any]:
    """Teen Patti at TP1: round 1 at T0 (a dealer logs on, two bets, a no-read and a foreign card
    on the way, A wins), round 2 an hour later (paused, resumed and voided by a supervisor, every
    act signed), round 3 an hour after that (B wins); a stud hand at ST1 three hours after T0 and
    a Seotda game at SD1 four hours after T0, both to their showdown; a Sevenluck round at SL1 five
    hours after T0 (one player plays, one folds). Returns their ids and times."""
    clock = Clock()
    info: dict[str, Any] = {}
    async with Served(cfg, clock) as s:
        svc = s.service
        await s.submit(TP, DealerLogon(dealer_id="dealer-ana"))
        assert (await svc.open_round(TP)).accepted
        r1 = info["r1"] = svc.tables[TP].current.round_id
        info["r1_open"] = svc.tables[TP].current.opened_at
        await s.submit(TP, PlaceBet(bet_id="b1", player_id="p1", bet_type="player_a", stake="10", round_id=r1))
        await s.submit(TP, PlaceBet(bet_id="b2", player_id="p2", bet_type="tie", stake="5", round_id=r1))
        await s.submit(TP, CloseBetting())
        await s.submit(TP, ScanRead(reader="SC1", code=DEAL[0], seq=1))
        await s.submit(TP, ReadFailed(reader="SC1", reason="noread", detail=""))
        await s.submit(TP, ScanRead(reader="SC1", code="01G", seq=3))  # a Hwatu card in a 52-card shoe
        for i, code in enumerate(DEAL[1:], start=4):
            await s.submit(TP, ScanRead(reader="SC1", code=code, seq=i))
        info["r1_end"] = clock.now

        clock.now = T0 + HOUR
        assert (await svc.open_round(TP)).accepted
        r2 = info["r2"] = svc.tables[TP].current.round_id
        await s.submit(TP, PlaceBet(bet_id="b3", player_id="p2", bet_type="player_b", stake="20", round_id=r2))
        await s.submit(TP, CloseBetting())
        await s.submit(TP, ScanRead(reader="SC1", code="2C", seq=20))
        await s.submit(TP, SupervisorPause(supervisor="sup-ana", reason="shoe jammed", command_id="c1",
                                           issued_at=clock.now, signature=SIG))
        await s.submit(TP, SupervisorResume(supervisor="sup-ana", command_id="c2", issued_at=clock.now,
                                            signature=SIG))
        await s.submit(TP, SupervisorVoid(supervisor="sup-bo", reason="shoe dropped", round_id=r2, command_id="c3",
                                          issued_at=clock.now, signature=SIG))

        clock.now = T0 + 2 * HOUR
        assert (await svc.open_round(TP)).accepted
        r3 = info["r3"] = svc.tables[TP].current.round_id
        await s.submit(TP, PlaceBet(bet_id="b4", player_id="p3", bet_type="player_b", stake="10", round_id=r3))
        await s.submit(TP, CloseBetting())
        for i, code in enumerate(TP_BLIND, start=30):
            await s.submit(TP, ScanRead(reader="SC1", code=code, seq=i))

        clock.now = T0 + 3 * HOUR
        info["stud"] = await s.play_peer_round(ST, "SC2", {"p1": (1, "50.00"), "p4": (2, "50.00"),
                                                           "p5": (3, "50.00")}, seed=11)
        clock.now = T0 + 4 * HOUR
        info["seotda"] = await s.play_peer_round(SD, "SC3", {"p1": (1, "1000"), "p6": (2, "1000"),
                                                             "p7": (3, "1000")}, seed=5)
        clock.now = T0 + 5 * HOUR
        assert (await svc.open_round(SL)).accepted
        rnd = svc.tables[SL].current
        info["sevenluck"] = rnd.round_id
        for bet_id, player, bet_type, stake, seat in (("s1", "p1", "ante", "10", 1), ("s2", "p1", "pair_plus", "5", 1),
                                                      ("s3", "p8", "ante", "10", 2)):
            await s.submit(SL, PlaceBet(bet_id=bet_id, player_id=player, bet_type=bet_type, stake=stake, seat=seat,
                                        round_id=rnd.round_id))
        await s.submit(SL, CloseBetting())
        for seq, code in enumerate(random.Random(3).sample(sorted(rnd.rules.game.deck), 9), start=1):
            await s.submit(SL, ScanRead(reader="SC4", code=code, seq=seq))
        await s.submit(SL, PlayerDecision(player_id="p1", action="PLAY", round_id=rnd.round_id))
        await s.submit(SL, PlayerDecision(player_id="p8", action="FOLD", round_id=rnd.round_id))
        for tid in (TP, ST, SD, SL):
            assert not svc.tables[tid].in_play
    return info


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The journal (path) and what was played on it, written once for the module."""
    tmp = tmp_path_factory.mktemp("studio")
    info = asyncio.run(play_studio(studio_config(tmp)))
    return tmp / "journal.sqlite", info


def cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``dealer ARGS`` in this process (the same parser and code as the command): status, out, err."""
    code = dealer_main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(code: int, err: str, *words: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def ids(rounds: list[dict[str, Any]]) -> list[str]:
    return [r["round_id"] for r in rounds]


# --- selectors -------------------------------------------------------------------------------------


def test_recall_by_round_id_without_a_table_or_a_config(studio, capsys) -> None:
    journal, info = studio
    code, out, err = cli("recall", "--journal", str(journal), "--round", info["r2"], "--json", capsys=capsys)
    assert code == 0, err
    [r2] = json.loads(out)
    assert r2["round_id"] == info["r2"] and r2["table_id"] == TP and r2["game"] == "teen-patti"
    assert r2["result"]["outcome"] == "VOIDED"
    assert r2["rules"]["source"].startswith("journal row ")  # the journal's table_rules, no configuration
    # the table is the round id's prefix; ids of several tables at once, in journal order
    picked = recall_journal(journal, None, Selection(rounds=(info["seotda"], info["r1"], info["stud"])))
    assert [r.record["round_id"] for r in picked] == [info["r1"], info["stud"], info["seotda"]]
    assert [r.record["table_id"] for r in picked] == [TP, ST, SD]
    # with TABLE too, and the same rounds as a configuration's recall shows
    assert ids(json.loads(cli("recall", TP, "--journal", str(journal), "--round", info["r1"], "--round", info["r3"],
                              "--json", capsys=capsys)[1])) == [info["r1"], info["r3"]]


def test_recall_by_time_range(studio, capsys) -> None:
    journal, info = studio
    j = str(journal)

    def between(*args: str) -> list[str]:
        code, out, err = cli("recall", TP, "--journal", j, *args, "--json", capsys=capsys)
        assert code == 0, err
        return ids(json.loads(out))

    # round 2 opened at T0 + 1 h; round 1 ended at T0 + a few ms, round 3 opened at T0 + 2 h
    assert between("--since", iso(T0 + HOUR - 60_000), "--until", iso(T0 + HOUR + 60_000)) == [info["r2"]]
    assert between("--since", iso(T0 + HOUR // 2)) == [info["r2"], info["r3"]]
    assert between("--until", iso(T0 + HOUR // 2)) == [info["r1"]]
    # the same instant in local time with its offset
    assert between("--since", "2027-01-15T09:59:00+01:00", "--until", "2027-01-15T10:01:00+01:00") == [info["r2"]]
    assert iso(T0 + HOUR) == "2027-01-15T09:00:00.000Z"
    # open..result overlaps the range: an instant inside round 1 selects it, one just after it does not
    inside = (info["r1_open"] + info["r1_end"]) // 2
    assert between("--since", iso(inside), "--until", iso(inside)) == [info["r1"]]
    assert between("--since", iso(info["r1_end"] + 10), "--until", iso(info["r1_end"] + 20)) == []
    assert between("--since", iso(T0 + 5 * HOUR)) == []
    # with --rounds: the last N of those selected
    assert between("--since", iso(T0), "--rounds", "1") == [info["r3"]]


def test_recall_by_player(studio, capsys) -> None:
    journal, info = studio
    sel = lambda **kw: [r.record["round_id"] for r in recall_journal(journal, TP, Selection(**kw))]  # noqa: E731
    assert sel(player="p2") == [info["r1"], info["r2"]]  # bet in both
    assert sel(player="p3") == [info["r3"]]
    assert sel(player="p2", last=1) == [info["r2"]]
    assert sel(player="p2", until=T0 + HOUR // 2) == [info["r1"]]  # selectors together: all must hold
    assert sel(player="nobody") == []
    # peer games: the players who bet (sat) and acted
    assert [r.record["round_id"] for r in recall_journal(journal, ST, Selection(player="p4"))] == [info["stud"]]
    assert recall_journal(journal, SD, Selection(player="p4")) == []
    code, out, _ = cli("recall", TP, "--journal", str(journal), "--player", "nobody", capsys=capsys)
    assert code == 0 and out.strip() == "no round matches the selection"


def test_recall_keeps_the_last_rounds_of_a_table_and_the_configuration_form(studio, capsys) -> None:
    journal, info = studio
    assert ids([r.record for r in recall_journal(journal, TP, Selection())]) == [info["r1"], info["r2"], info["r3"]]
    assert ids([r.record for r in recall_journal(journal, TP, Selection(last=2))]) == [info["r2"], info["r3"]]
    settings = load_settings(journal.parent / "studio.toml")
    assert ids(recall(settings, TP, rounds=1)) == [info["r3"]]
    assert ids(recall(settings, TP, selection=Selection(rounds=(info["r1"],)))) == [info["r1"]]
    # the real command, as a process, reading a journal it is given (read-only: the file is unchanged)
    before = journal.read_bytes()
    out = run_cli("recall", ST, "--journal", str(journal), "--json", cwd=journal.parent, timeout=120)
    assert out.returncode == 0, out.stderr
    [stud] = json.loads(out.stdout)
    assert stud["round_id"] == info["stud"] and stud["result"]["outcome"] == "COMPLETED"
    assert journal.read_bytes() == before


# --- rules from the journal, or refused ------------------------------------------------------------


def rules_less_journal(tmp: Path) -> tuple[Path, str]:
    """A journal from before rules events: rounds written by the pure core's table and the
    journal itself (as the service commits them), with no ``table_rules`` row."""
    from dealer.core.events import OpenRound
    from dealer.core.table import Table
    from dealer.edge.journal import Batch, Journal

    settings = load_settings(studio_config(tmp))
    path = tmp / "journal.sqlite"
    journal = Journal(path)
    table = Table(next(t for t in settings.tables if t.id == TP).rules(), series=journal.journal_id)
    rid = table.next_round_id()
    batch = Batch()
    events = [OpenRound(round_id=rid, at=T0, betting_closes_at=T0 + 15_000),
              PlaceBet(bet_id="b1", player_id="p1", bet_type="player_b", stake="10", at=T0 + 1),
              CloseBetting(at=T0 + 2)] + [ScanRead(reader="SC1", code=c, seq=i, at=T0 + 3 + i)
                                           for i, c in enumerate(TP_BLIND)]
    for ev in events:
        step = table.handle(ev)
        assert step.accepted and step.journal
        batch.events.append((TP, rid, ev))
    journal.commit(batch)
    journal.close()
    return path, rid


def test_a_round_without_journaled_rules_needs_the_configuration(tmp_path: Path, capsys) -> None:
    path, rid = rules_less_journal(tmp_path)
    one_line(*cli("hand", "--round", rid, "--journal", str(path), capsys=capsys)[::2],
             "no table_rules event for table TP1 before round", rid, "--config")
    one_line(*cli("recall", "--journal", str(path), "--round", rid, capsys=capsys)[::2], "no table_rules event")
    # with the configuration its rules are the configuration's, and said so
    code, out, err = cli("recall", TP, "--config", str(tmp_path / "studio.toml"), "--json", capsys=capsys)
    assert code == 0, err
    [r] = json.loads(out)
    assert r["round_id"] == rid and r["rules"]["source"].startswith("configuration")
    code, out, err = cli("hand", "--round", rid, "--config", str(tmp_path / "studio.toml"), capsys=capsys)
    assert code == 0, err
    assert json.loads(out)["agrees"] is True and json.loads(out)["report"]["winner"] == "B"


# --- dealer hand --round ---------------------------------------------------------------------------


def test_hand_round_re_evaluates_teen_patti_under_its_rules(studio, capsys) -> None:
    journal, info = studio
    code, out, err = cli("hand", "--round", info["r1"], "--journal", str(journal), capsys=capsys)
    assert code == 0, err
    rep = json.loads(out)
    assert rep["agrees"] is True and rep["differences"] == []
    assert rep["report"]["winner"] == "A" == rep["recorded"]["winner"]
    assert rep["report"]["hands"]["A"]["category"] == "trail_of_aces"
    assert rep["options"]["tie_ratio"] == "50" and rep["rules"]["source"].startswith("journal row ")
    assert "winner" in rep["compared"] and "bet tie outcome" in rep["compared"]
    assert rep["published"] == {"in_outbox": True, "same": True}  # settlement never acknowledged it here
    # a voided round: no hand decided it
    code, out, err = cli("hand", "--round", info["r2"], "--journal", str(journal), capsys=capsys)
    assert code == 0, err
    assert json.loads(out)["agrees"] is None and "voided" in json.loads(out)["note"]
    # the GAME CARDS --vs form is unchanged
    code, out, _ = cli("hand", "teen-patti", "AS", "AD", "AC", "--vs", "KS", "KH", "KC", capsys=capsys)
    assert code == 0 and json.loads(out)["winner"] == "A"


def test_hand_round_re_evaluates_stud_and_seotda(studio, capsys) -> None:
    journal, info = studio
    code, out, err = cli("hand", "--round", info["stud"], "--journal", str(journal), capsys=capsys)
    assert code == 0, err
    stud = json.loads(out)
    assert stud["game"] == "stud" and stud["agrees"] is True, stud["differences"]
    assert stud["recorded"]["details"]["showdown"] is True  # everybody called: three hands at the showdown
    assert len(stud["report"]["hands"]) == 3 and any(c.startswith("pot ") for c in stud["compared"])
    code, out, err = cli("hand", "--round", info["seotda"], "--journal", str(journal), capsys=capsys)
    assert code == 0, err
    seotda = json.loads(out)
    assert seotda["game"] == "seotda" and seotda["agrees"] is True, seotda["differences"]
    assert seotda["options"]["stake"] == "10" and seotda["options"]["seats"] == 3  # the table's, as journaled
    named = {seotda["report"]["hands_of"][i]: h["name"] for i, h in enumerate(seotda["report"]["hands"])}
    assert named == seotda["recorded"]["details"]["names"]  # every hand at the showdown, named alike
    assert "winners" in seotda["compared"] or "the best hand is among the winners" in seotda["compared"]


def test_hand_round_re_evaluates_sevenluck_and_the_report_shows_decisions(studio, capsys) -> None:
    journal, info = studio
    code, out, err = cli("hand", "--round", info["sevenluck"], "--journal", str(journal), capsys=capsys)
    assert code == 0, err
    rep = json.loads(out)
    assert rep["agrees"] is True, rep["differences"]
    assert list(rep["report"]) == ["P1"]  # the hand that played; the folded one decided nothing
    assert "P1 against the dealer" in rep["compared"] and "dealer qualifies" in rep["compared"]
    code, text, err = cli("recall", "--journal", str(journal), "--round", info["sevenluck"], "--report", capsys=capsys)
    assert code == 0, err
    plays = text[text.index("6. DECISIONS AND ACTIONS"):text.index("7. SUPERVISOR")]
    assert "p1  PLAY  by player" in plays and "p8  FOLD  by player" in plays
    result = text[text.index("8. RESULT"):text.index("9. VOID")]
    assert any(line.split()[:4] == ["p1:play", "p1", "play", "10"] for line in result.splitlines())  # the Play bet
    assert any(line.split()[:6] == ["s3", "p8", "ante", "10", "LOSE", "0.00"] for line in result.splitlines())


def test_hand_round_exits_1_when_the_published_result_differs(studio, tmp_path: Path, capsys) -> None:
    """The result waiting in the outbox (what settlement was sent) is altered: the replay and the
    hand report no longer agree with it."""
    journal, info = studio
    copy = tmp_path / "journal.sqlite"
    src = sqlite3.connect(journal)
    dst = sqlite3.connect(copy)
    src.backup(dst)
    src.close()
    key = f"{TP}:{info['r1']}"
    dst.execute("UPDATE outbox SET payload = CAST(replace(CAST(payload AS TEXT), '\"winner\":\"A\"', "
                "'\"winner\":\"B\"') AS BLOB) WHERE key = ?", (key,))
    dst.commit()
    dst.close()
    code, out, err = cli("hand", "--round", info["r1"], "--journal", str(copy), capsys=capsys)
    rep = json.loads(out)
    assert code == 1, err
    assert rep["agrees"] is False and rep["published"] == {"in_outbox": True, "same": False}
    assert any("outbox" in d for d in rep["differences"])


# --- the dispute report ----------------------------------------------------------------------------


def test_the_dispute_report_of_a_completed_round(studio, capsys) -> None:
    journal, info = studio
    code, text, err = cli("recall", "--journal", str(journal), "--round", info["r1"], "--report", capsys=capsys)
    assert code == 0, err
    jid = info["r1"].split("-")[1]
    for words in ([f"DISPUTE REPORT  round {info['r1']}"], ["Table", TP], ["Game", "teen-patti"],
                  ["Rules hash"], ["Software version", "rules from journal row"], ["Journal", f"id {jid}"],
                  ["Dealt by", "dealer-ana"]):
        assert any(all(w in line for w in words) for line in text.splitlines()), words
    sections = ["1. DEALERS", "2. READS", "3. RESCANS", "4. CARDS DEALT", "5. BETS", "6. DECISIONS AND ACTIONS",
                "7. SUPERVISOR ACTS", "8. RESULT AND PAYOUTS", "9. VOID", "SIGNATURES"]
    assert [s for s in sections if s in text] == sections
    assert text.index("2. READS") < text.index("3. RESCANS") < text.index("8. RESULT")
    reads = text[text.index("2. READS"):text.index("3. RESCANS")]
    assert "seq 1" in reads and "seq 3" in reads and "no read (noread)" in reads
    assert "received 2027-01-15T08:00:00" in reads and "recorded " in reads  # the test clock; the commit's clock
    assert "REFUSED at B1: foreign_card (01G)" in reads and "registered at A1" in reads
    rescans = text[text.index("3. RESCANS"):text.index("4. CARDS")]
    assert "reason noread" in rescans and "reason foreign_card" in rescans
    bets = text[text.index("5. BETS"):text.index("6. DECISIONS")]
    assert "p1  bet b1  player_a 10" in bets and "p2  bet b2  tie 5" in bets
    result = text[text.index("8. RESULT"):text.index("9. VOID")]
    assert "Outcome COMPLETED, winner A" in result
    assert any(line.split()[:7] == ["b1", "p1", "player_a", "10", "WIN", "19.50", "9.50"]
               for line in result.splitlines())
    assert any(line.split()[:5] == ["b2", "p2", "tie", "5", "LOSE"] for line in result.splitlines())
    assert "Not voided." in text and "PRIVATE" not in text  # Teen Patti's cards are all face up


def test_the_dispute_report_of_a_voided_round_names_every_supervisor_act(studio, capsys) -> None:
    journal, info = studio
    code, text, err = cli("recall", TP, "--journal", str(journal), "--round", info["r2"], "--report",
                          capsys=capsys)
    assert code == 0, err
    acts = text[text.index("7. SUPERVISOR ACTS"):text.index("8. RESULT")]
    assert "pause  by sup-ana  signature present" in acts and "reason: shoe jammed" in acts
    assert "resume  by sup-ana  signature present" in acts
    assert "void  by sup-bo  signature present" in acts and "reason: shoe dropped  applied" in acts
    void = text[text.index("9. VOID"):]
    assert "VOIDED by supervisor sup-bo" in void and "signature present" in void and "shoe dropped" in void
    assert "every bet refunded" in text and "REFUND" in text  # the bet b3 is refunded
    # as JSON, the same report as data
    code, out, _ = cli("recall", "--journal", str(journal), "--round", info["r2"], "--report", "--json",
                       capsys=capsys)
    [rep] = json.loads(out)
    assert rep["void"]["supervisor"] == "sup-bo" and rep["void"]["signature"] is True
    assert [a["act"] for a in rep["supervisor"]] == ["pause", "resume", "void"]
    assert rep["dealers"] == ["dealer-ana"] and rep["result"]["payouts"][0]["outcome"] == "REFUND"


def test_the_dispute_report_shows_hole_cards_marked_private(studio, capsys) -> None:
    journal, info = studio
    code, text, err = cli("recall", "--journal", str(journal), "--round", info["stud"], "--report", capsys=capsys)
    assert code == 0, err
    assert "CONTAINS PRIVATE HOLE CARDS" in text.splitlines()[2]
    cards = text[text.index("4. CARDS DEALT"):text.index("5. BETS")]
    assert "P1.1" in cards and "PRIVATE to p1" in cards and "BURN1" in cards
    plays = text[text.index("6. DECISIONS AND ACTIONS"):text.index("7. SUPERVISOR")]
    assert "BRING_IN" in plays and "by player" in plays and "p4" in plays
    result = text[text.index("8. RESULT"):text.index("9. VOID")]
    assert all(p in result for p in ("p1", "p4", "p5")) and "Total staked 150.00" in result


# --- bad input: one line, exit 2 -------------------------------------------------------------------


def test_bad_input_is_one_line_and_exit_2(studio, tmp_path: Path, capsys) -> None:
    journal, info = studio
    j = str(journal)
    missing = tmp_path / "none.sqlite"
    one_line(*cli("recall", "--journal", j, "--round", "TP1-aaaaaaaa-000099", capsys=capsys)[::2],
             "no round TP1-aaaaaaaa-000099 in journal")
    one_line(*cli("recall", ST, "--journal", j, "--round", info["r1"], capsys=capsys)[::2],
             "is not a round of table ST1")
    one_line(*cli("recall", TP, "--journal", j, "--since", "yesterday", capsys=capsys)[::2],
             "--since 'yesterday' is not an ISO-8601 time")
    one_line(*cli("recall", TP, "--journal", j, "--until", "2027-01-15T08:00:00", capsys=capsys)[::2],
             "--until", "no time zone")
    one_line(*cli("recall", TP, "--journal", j, "--since", iso(T0 + HOUR), "--until", iso(T0), capsys=capsys)[::2],
             "--since", "is after --until")
    one_line(*cli("recall", TP, "--journal", str(missing), capsys=capsys)[::2], "no journal at", str(missing))
    assert not missing.exists()  # never created
    one_line(*cli("recall", TP, capsys=capsys)[::2], "--journal PATH_OR_URL", "--config FILE")
    one_line(*cli("recall", "--journal", j, capsys=capsys)[::2], "give TABLE, or --round ROUND_ID")
    one_line(*cli("recall", TP, "--journal", j, "--report", capsys=capsys)[::2], "--report", "--round ROUND_ID")
    one_line(*cli("recall", "XX9", "--journal", j, capsys=capsys)[::2], "has no round of table XX9")
    one_line(*cli("hand", "--round", "TP1-aaaaaaaa-000099", "--journal", j, capsys=capsys)[::2],
             "dealer hand:", "no round TP1-aaaaaaaa-000099")
    one_line(*cli("hand", "--round", info["r1"], "--journal", str(missing), capsys=capsys)[::2], "no journal at")
    one_line(*cli("hand", "--round", info["r1"], capsys=capsys)[::2], "--journal PATH_OR_URL or --config FILE")
    one_line(*cli("hand", "teen-patti", "--round", info["r1"], "--journal", j, capsys=capsys)[::2],
             "leave out GAME")
    one_line(*cli("hand", "teen-patti", "AS", "KD", "QC", capsys=capsys)[::2], "--vs")
    one_line(*cli("hand", "teen-patti", "AS", "KD", "QC", "--vs", "2H", "3H", "4H", "--journal", j,
                  capsys=capsys)[::2], "--journal and --config go with --round")
    # the real command, as a process
    out = run_cli("recall", "--journal", str(missing), "--round", info["r1"], cwd=tmp_path, timeout=120)
    one_line(out.returncode, out.stderr, "dealer recall: no journal at")
    assert list(tmp_path.iterdir()) == []
