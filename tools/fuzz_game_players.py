"""The three peer games of the live-service fuzz targets (:mod:`tools.fuzz_games`): how each
game's players sit down and answer a turn, validly (the simulated players' strategies of
``simulators/*_players.py``) and wrongly, which cards the virtual dealer forces (Seotda's 9·4s
and draws, so that rematches happen), and how each result must return the chips.
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

from tools.fuzz_target import Target, need
from tools.fuzz_game_state import as_money
from tools.fuzz_games import GameCommandsTarget


# --- Seven-Card Stud -----------------------------------------------------------------------------

_STUD_ACTIONS = ("CHECK", "BET", "BRING_IN", "CALL", "RAISE", "ALL_IN", "FOLD")
_OTHER_ACTIONS = ("X2_RAISE", "QUARTER", "HALF", "MAX", "PLAY", "CHOOSE", "GO", "STOP", "REMATCH", "PLAY_ON",
                  "REJOIN", "SIT_OUT")
_BAD_AMOUNTS: tuple[Any, ...] = ("0", "-1.00", "0.005", "1.001", "99999999", "1e2", "1E+1", " 1.00", "1,00", "",
                                 "NaN", "Infinity", 1.5, 2, None, "0.50.0", "\u0661.00")


class StudCommands(GameCommandsTarget):
    """Seven-Card Stud: fold, check, call, bet, raise, all-in and the bring-in, the exposure window."""

    name, game = "stud_commands", "stud"
    stakes = ("4.00", "9.50", "20.00", "60.00", "2.00")
    bad_stakes = ("0.001", "-5.00", "1e3", "100000", "0", "5.005")
    foreign_cards = ("01G", "JK", "1S", "AS")
    option_sets = (
        {"options": {"seats": 4, "exposure_window_seconds": 60}, "limits": {"chips": {"min": "1", "max": "500"}}},
        {"options": {"seats": 4, "ante": "0.25", "bring_in": "FIXED_0.50", "min_raise_rule": "PREVIOUS_INCREMENT",
                     "rake_early_end": "RAKE", "raise_cap": 2, "exposure_window_seconds": 60},
         "limits": {"chips": {"min": "1", "max": "500"}}},
        {"options": {"seats": 4, "exposure_window_seconds": 0, "wash_every": 1},
         "limits": {"chips": {"min": "1", "max": "500"}}},
    )

    def valid_action(self, rng: random.Random, turn: dict[str, Any]) -> dict[str, Any]:
        from simulators.stud_players import choose

        choice = choose(rng.choice(("calling", "random", "random", "aggressive")), turn, rng)
        out: dict[str, Any] = {"action": choice.action}
        if choice.amount is not None:
            out["amount"] = str(choice.amount)
        return out

    def wrong_action(self, rng: random.Random, turn: dict[str, Any]) -> dict[str, Any]:
        offered = list(turn.get("actions") or ())
        r = rng.random()
        if r < 0.25:
            action = rng.choice([a for a in _STUD_ACTIONS if a not in offered] or list(_STUD_ACTIONS))
            out: dict[str, Any] = {"action": action}
            if action in ("BET", "BRING_IN", "RAISE"):
                out["amount"] = rng.choice(("1.00", "3.00", "0.50"))
            return out
        if r < 0.40:
            return {"action": rng.choice(_OTHER_ACTIONS)}
        if r < 0.75:  # an amount outside the range, not of the unit, or where none goes
            action = rng.choice(offered or list(_STUD_ACTIONS))
            rng_ = turn.get("raise") if action == "RAISE" else turn.get("bet")
            amount: Any = rng.choice(_BAD_AMOUNTS)
            if rng_ and rng.random() < 0.5:
                lo, hi = as_money(rng_["min"]), as_money(rng_["max"])
                amount = str(rng.choice((lo - Decimal("0.01"), hi + Decimal("0.01"), hi * 10, lo + Decimal("0.005"))))
            out = {"action": action}
            if amount is not None:
                out["amount"] = amount
            return out
        if r < 0.85:
            return {"action": rng.choice(("BET", "RAISE", "BRING_IN"))}  # an amount it needs, missing
        return {"action": rng.choice(offered or ["CALL"]), "card": rng.choice(("AS", "01G"))}

    def exposed_position(self, rng: random.Random, cur: Any) -> str:
        seats = sorted(cur.seat_owner) if cur is not None and cur.seat_owner else [1, 2]
        s = rng.choice(seats)
        return rng.choice((f"P{s}.7", f"P{s}.7", f"P{s}.7", f"P{s}.3", f"P{s}.1", f"P{s}.8", "P9.7", "BURN1",
                           "BURN4", "COMM", "P.7"))

    def check_result(self, result: Any) -> None:
        brought = as_money(result.accepted_bets.stakes.get(self.chips_bet, "0"))
        if result.refund_all:
            return  # every accepted bet goes back whole: settlement refunds the stakes
        back = sum((as_money(b[self.chips_bet].returned) for b in result.player_bets.values()), Decimal(0))
        rake = as_money(result.details.get("rake", "0"))
        need(all(as_money(b[self.chips_bet].returned) >= 0 for b in result.player_bets.values()),
                   f"round {result.round_id}: a negative return", key="a negative return")
        need(back + rake == brought, f"round {result.round_id}: returned {back} + rake {rake} != brought "
                   f"{brought}", key=f"{self.game}: chips not conserved")


# --- Seotda ----------------------------------------------------------------------------------------

_BUTTONS = ("FOLD", "BET", "X2_RAISE", "CALL", "QUARTER", "HALF", "MAX", "ALL_IN", "CHECK")
_CHOICES = ("REMATCH", "PLAY_ON", "REJOIN", "SIT_OUT")


class SeotdaCommands(GameCommandsTarget):
    """Seotda: the nine buttons, reservations, 9·4 rematch choices (``PROMPT``) and re-entries
    (``HALF_POT``); the dealer is dealt 9·4s and draws so that rematches happen."""

    name, game = "seotda_commands", "seotda"
    stakes = ("600", "750", "1000", "2500")
    bad_stakes = ("599", "600.5", "0", "-600", "6e2", "1000000000")
    foreign_cards = ("AS", "11G", "12JD")
    reserve_actions = _BUTTONS + ("REMATCH", "RAISE")
    _common = {"currency": "KRW", "minor_unit": "1", "limits": {"chips": {"min": "1", "max": "100000"}}}
    option_sets = (
        {**_common, "options": {"stake": 10, "seats": 4, "rematch_94_mode": "PROMPT", "rematch_reentry": "HALF_POT"}},
        {**_common, "options": {"stake": 10, "seats": 4, "rematch_94_mode": "PROMPT", "rematch_reentry": "HALF_POT",
                                "rematch_ante": "STAKE", "ante_and_blind": "TWO_POSTS", "raise_cap": 2}},
        {**_common, "options": {"stake": 10, "seats": 4, "rematch_94_mode": "ALWAYS", "draw_resolution": "REMATCH",
                                "pot_fraction_base": "POT_BEFORE_ACTION", "min_chips_check": "JOIN_ONLY",
                                "first_seat": "ROTATE"}},
    )

    def valid_action(self, rng: random.Random, turn: dict[str, Any]) -> dict[str, Any]:
        from simulators.seotda_players import choose

        return {"action": choose(rng.choice(("calling", "random", "random")), turn, rng)}

    def wrong_action(self, rng: random.Random, turn: dict[str, Any]) -> dict[str, Any]:
        buttons = set(turn.get("buttons") or ())
        r = rng.random()
        if turn.get("choice"):  # a choice turn: a button, or the other kind's answer
            if r < 0.5:
                return {"action": rng.choice(_BUTTONS)}
            return {"action": rng.choice([c for c in _CHOICES if c not in (turn.get("actions") or ())] or ["FOLD"])}
        if r < 0.3:
            return {"action": rng.choice([b for b in _BUTTONS if b not in buttons] or list(_BUTTONS))}
        if r < 0.5:
            return {"action": rng.choice(_CHOICES)}
        if r < 0.75:  # a button names its own amount: none may be sent
            out: dict[str, Any] = {"action": rng.choice(sorted(buttons) or ["CALL"])}
            amount = rng.choice(_BAD_AMOUNTS + ("10", "20"))
            if amount is not None:
                out["amount"] = amount
            return out
        if r < 0.9:
            return {"action": rng.choice(("RAISE", "BRING_IN")), "amount": "20"}
        return {"action": rng.choice(sorted(buttons) or ["CHECK"]), "card": rng.choice(("01G", "09J"))}

    def scenario(self, rng: random.Random) -> dict[str, str]:
        """A 9·4 for one player (an animal 9·4 with the two animal cards), or a draw between two,
        in the first game or the first rematch: position -> card."""
        r = rng.random()
        prefix = rng.choice(("", "", "R1."))
        a, b = rng.sample(range(1, 5), 2)
        if r < 0.3:
            nine, four = (("09A", "04A") if rng.random() < 0.5 else (rng.choice(("09A", "09R")), rng.choice(("04A", "04R"))))
            return {f"{prefix}S{a}.1": nine, f"{prefix}S{a}.2": four}
        if r < 0.5:
            m1, m2 = rng.sample(range(1, 11), 2)
            cards = {m: [c for c in self._deck() if c.startswith(f"{m:02d}")] for m in (m1, m2)}
            return {f"{prefix}S{a}.1": cards[m1][0], f"{prefix}S{a}.2": cards[m2][0],
                    f"{prefix}S{b}.1": cards[m1][1], f"{prefix}S{b}.2": cards[m2][1]}
        return {}

    @staticmethod
    def _deck() -> tuple[str, ...]:
        from dealer.core.cards import SEOTDA_20

        return SEOTDA_20

    def card_for(self, cur: Any, pos: Any) -> str | None:
        return self.forced.get(pos.name)

    def exposed_position(self, rng: random.Random, cur: Any) -> str:
        return rng.choice(("S1.2", "S2.1", "R1.S1.2", "P1.7"))

    def check_result(self, result: Any) -> None:
        if result.refund_all:
            return
        brought = as_money(result.accepted_bets.stakes.get(self.chips_bet, "0"))
        back = sum((as_money(b[self.chips_bet].returned) for b in result.player_bets.values()), Decimal(0))
        need(back == brought, f"round {result.round_id}: returned {back} != brought {brought}",
                   key=f"{self.game}: chips not conserved")


# --- Matgo -------------------------------------------------------------------------------------------


class MatgoCommands(GameCommandsTarget):
    """Matgo: the player's plays, choices, Go and Stop against the house AI; redeals."""

    name, game = "matgo_commands", "matgo"
    players = ("p1", "p2", "house-ai")
    chips_bet = "cover"
    seats = 1
    stakes = ("50.00", "80.00", "200.00", "1000.00")
    bad_stakes = ("49.99", "50.001", "-50.00", "5e1", "0")
    foreign_cards = ("AS", "JK", "13B")
    reserve_actions = ("PLAY", "GO", "STOP", "CHOOSE")
    _common = {"limits": {"cover": {"min": "1", "max": "10000"}}}
    option_sets = (
        {**_common, "options": {"point_value": "1.00", "min_cover_points": 50, "first_player": "PLAYER",
                                "ai_budget_ms": 1}},
        {**_common, "options": {"point_value": "1.00", "min_cover_points": 50, "first_player": "AI",
                                "ai_budget_ms": 1}},
        {**_common, "options": {"point_value": "0.50", "min_cover_points": 100, "first_player": "RANDOM",
                                "ai_budget_ms": 1}},
    )

    def valid_action(self, rng: random.Random, turn: dict[str, Any]) -> dict[str, Any]:
        from simulators.matgo_players import choose

        action, card = choose(rng.choice(("random", "random", "stopper")), turn, rng)
        return {"action": action, **({"card": card} if card is not None else {})}

    def wrong_action(self, rng: random.Random, turn: dict[str, Any]) -> dict[str, Any]:
        from dealer.core.cards import HWATU_48

        actions, cards = list(turn.get("actions") or ()), list(turn.get("cards") or ())
        r = rng.random()
        if r < 0.3:  # a card that is not in hand (or not a Hwatu card)
            return {"action": rng.choice(actions or ["PLAY"]),
                    "card": rng.choice([c for c in HWATU_48 if c not in cards][:40] + ["AS", "JK", "01g"])}
        if r < 0.5:
            move = rng.choice([a for a in ("PLAY", "CHOOSE", "GO", "STOP") if a not in actions] or ["GO"])
            return {"action": move, **({"card": rng.choice(cards)} if cards and rng.random() < 0.5 else {})}
        if r < 0.65:
            return {"action": rng.choice(actions or ["PLAY"])}  # PLAY or CHOOSE without its card
        if r < 0.8:
            out: dict[str, Any] = {"action": rng.choice(actions or ["STOP"]), "amount": rng.choice(("1.00", "0", 1))}
            if cards:
                out["card"] = rng.choice(cards)
            return out
        return {"action": rng.choice(_STUD_ACTIONS + _BUTTONS)}

    def exposed_position(self, rng: random.Random, cur: Any) -> str:
        return rng.choice(("F.1", "O.3", "L1", "S1", "P1.7"))

    def check_result(self, result: Any) -> None:
        if result.refund_all:
            return
        details = result.details
        for bets in result.player_bets.values():
            cover = as_money(result.accepted_bets.stakes.get(self.chips_bet, "0"))
            returned = as_money(bets[self.chips_bet].returned)
            money = as_money(details.get("money", "0"))
            if result.winner == "PLAYER":
                want = cover + money
            elif result.winner == "AI":
                want = max(Decimal(0), cover - money)
            else:
                want = cover
            need(returned == want, f"round {result.round_id}: cover {cover} returned {returned}, the "
                       f"payment ({result.winner}, {money}) gives {want}", key="matgo: cover not returned exactly")


GAME_CLASSES: dict[str, type[Target]] = {cls.name: cls for cls in (StudCommands, SeotdaCommands, MatgoCommands)}
