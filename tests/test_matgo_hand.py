"""``dealer hand matgo``: captured piles scored and a Stop's payment, for disputes (issue 14
item 9). The worked examples are the rulebook's (``matgo.md`` §5.6 scoring, §7.3 payment),
with concrete piles where the rulebook names only the relevant cards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dealer.core.cards import HWATU_48, CardError
from dealer.games.matgo import MatgoOptions, hand_report

ROOT = Path(__file__).resolve().parent.parent
SINGLES = [c for c in HWATU_48 if c[2] == "J" and not c.endswith("JD")]


def junk(n: int, start: int = 0) -> list[str]:
    return SINGLES[start:start + n]


def S(text: str) -> list[str]:
    return text.split()


def report(stopper: list[str], loser: list[str] | None = None, go: int = 0, **options: str) -> dict:
    return hand_report(stopper, loser or [], go, MatgoOptions.model_validate(options))


# --- §5.6 scoring examples -----------------------------------------------------------------

SCORING = [  # (example, pile, expected score fields)
    (1, "01G 03G 08G", {"brights": 3, "total": 3}),
    (2, "01G 03G 12G", {"brights": 2, "total": 2}),
    (3, "01G 03G 08G 12G", {"brights": 4, "total": 4}),
    (4, "01G 03G 08G 11G 12G", {"brights": 15, "total": 15}),
    (5, "02A 04A 08A 05A 06A", {"animals": 6, "godori": True, "total": 6}),
    (6, "01R 02R 03R 04R 05R", {"ribbons": 4, "total": 4}),
    (7, "04R 05R 12R", {"ribbons": 0, "total": 0}),
    (8, "01J1 01J2 02J1 02J2 03J1 03J2 04J1 04J2 11JD", {"junk_units": 10, "junk": 1, "total": 1}),
    (9, "02A 05A 06A 07A 09A 01J1 01J2 02J1 02J2 03J1 03J2 04J1 04J2",
     {"cup_as": "animal", "animals": 1, "junk": 0, "total": 1}),
    (10, "02A 05A 06A 09A 01J1 01J2 02J1 02J2 03J1 03J2 04J1 04J2 05J1",
     {"cup_as": "junk", "junk_units": 11, "junk": 2, "total": 2}),
    (11, "01G 03G 08G 02A 04A 08A 10A 12A 01J1 01J2 02J1 02J2 03J1 03J2 04J1 04J2 05J1 11JD",
     {"brights": 3, "animals": 6, "junk": 2, "total": 11}),
]


@pytest.mark.parametrize("example,pile,expected", SCORING, ids=[f"5.6-{e[0]}" for e in SCORING])
def test_scoring_examples_of_the_rulebook(example: int, pile: str, expected: dict) -> None:
    r = report(S(pile))
    score = r["stopper"]["score"]
    for key, value in expected.items():
        assert score[key] == value, (example, key, score)
    assert r["stop_allowed"] is (score["total"] >= 7)
    assert ("warning" in r) is (score["total"] < 7)


# --- §7.3 payment examples -----------------------------------------------------------------

PAYMENT = [  # (example, stopper's pile, loser's pile, Go count, go_adjusted, multipliers, payment points)
    (1, S("01G 03G 08G 02A 05A 06A 07A 10A") + junk(12), junk(6, 12), 0, 7, ["bright"], 14),
    (2, S("01R 02R 03R") + junk(15), junk(4, 15), 1, 10, ["junk"], 20),
    (3, junk(20), junk(2, 20) + ["11JD", "12JD"], 2, 13, [], 13),
    (4, S("02A 04A 08A 05A 06A 07A 10A 01R 02R 03R") + junk(10), junk(5, 10), 3, 24, ["animals"], 48),
    (5, S("02A 04A 08A 05A 06A 01R 02R 03R 06R 09R 10R") + junk(10), junk(5, 10), 5, 120, [], 120),
    # the loser's cup protects: 3 + 2 = 5 units, no junk multiplier (the loser's 11G: no bright one)
    (7, S("01G 03G 08G") + junk(15), junk(3, 15) + ["09A", "11G"], 0, 9, [], 9),
]


@pytest.mark.parametrize("example,stopper,loser,go,adjusted,multipliers,points", PAYMENT,
                         ids=[f"7.3-{e[0]}" for e in PAYMENT])
def test_payment_examples_of_the_rulebook(example: int, stopper: list[str], loser: list[str], go: int,
                                          adjusted: int, multipliers: list[str], points: int) -> None:
    r = report(stopper, loser, go)
    assert r["payment"]["go_adjusted"] == adjusted
    assert r["payment"]["multipliers"] == multipliers
    assert r["payment"]["payment_points"] == points
    assert r["payment"]["explain"].endswith(f"= {points}")
    assert r["money"] == {"point_value": "1.00", "amount": f"{points}.00",
                          "note": "paid by the loser to the stopper; a player's loss is limited to the cover"}
    assert r["stop_allowed"] and "warning" not in r


def test_payment_example_7_without_the_cup_the_junk_multiplier_applies() -> None:
    r = report(S("01G 03G 08G") + junk(15), junk(3, 15) + ["10J1", "11G"])
    assert r["loser"]["junk_units_for_protection"] == 4 and r["payment"]["multipliers"] == ["junk"]


def test_payment_example_1_explained_and_priced() -> None:
    r = report(S("01G 03G 08G 02A 05A 06A 07A 10A") + junk(12), junk(6, 12), 0, point_value="0.50")
    stopper = r["stopper"]["score"]
    assert (stopper["brights"], stopper["junk"], stopper["animals"], stopper["total"]) == (3, 3, 1, 7)
    assert r["loser"]["score"]["bright_count"] == 0 and r["loser"]["junk_units_for_protection"] == 6
    assert r["payment"]["explain"] == "7 x 2 (bright) = 14"
    assert r["money"]["amount"] == "7.00"  # 14 points at 0.50


def test_go_adjustment_is_explained() -> None:
    six_units = junk(2, 20) + ["11JD", "12JD"]
    assert report(junk(20), six_units, 2)["payment"]["explain"] == "(11 + 2 for 2 Go) = 13"
    assert report(junk(20), six_units, 4)["payment"]["explain"] == "11 x 4 (4 Go) = 44"
    assert report(junk(20), junk(2, 20), 1)["payment"]["explain"] == "(11 + 1 for 1 Go) x 2 (junk) = 24"


def test_a_pile_that_could_not_have_stopped_is_reported_with_a_warning() -> None:
    r = report(S("01G 03G 08G"), [])
    assert not r["stop_allowed"] and "at least 7" in r["warning"]
    assert r["payment"]["payment_points"] == 6  # 3 x 2 (bright): what the formula gives, for the record


@pytest.mark.parametrize("stopper,loser,go,error", [
    (["AS"], [], 0, CardError),
    (["01G", "01G"], [], 0, CardError),
    (["01G"], ["01G"], 0, CardError),
    (["01G"], [], -1, ValueError),
    (["01G"], [], 11, ValueError),
])
def test_bad_piles_are_refused(stopper: list[str], loser: list[str], go: int, error: type) -> None:
    with pytest.raises(error):
        report(stopper, loser, go)


@pytest.mark.integration
def test_cli_worked_example_with_commas_and_an_empty_loser_pile() -> None:
    """Example 1 of §7.3 on the command line: piles as codes separated by spaces or commas."""
    stopper = "01G,03G,08G 02A,05A,06A,07A,10A " + ",".join(junk(12))
    proc = subprocess.run([sys.executable, "-m", "dealer", "hand", "matgo", *stopper.split(), "--vs",
                           *junk(6, 12)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["payment"]["payment_points"] == 14 and out["go_count"] == 0
    proc = subprocess.run([sys.executable, "-m", "dealer", "hand", "matgo", *junk(20), "--vs", "none", "--go", "3"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["loser"]["cards"] == [] and out["payment"]["multipliers"] == ["junk"]  # 0 units < 5
    assert out["payment"]["payment_points"] == 11 * 2 * 2
