"""The games' command fuzzer's inputs (:mod:`tools.fuzz_games`): what it sends to the live table
(player commands, bets, station input and timer events, valid, wrong and mutated)."""

from __future__ import annotations

import json
import random
from typing import Any

from tools.fuzz_inputs import MAX_INPUT, dump_json, encode_text, mutate_tree
from tools.fuzz_game_state import TID, TIMER


class GameCommands:
    """The inputs the games' fuzzer sends (a mixin of :class:`tools.fuzz_games.GameCommandsTarget`):
    commands, bets, actions and station input, mostly valid, some wrong, some mutated; the
    game's subclass says what a valid and a wrong action is."""

    # -- generating ---------------------------------------------------------------------------

    def generate(self, rng: random.Random) -> tuple[str, bytes]:
        self._ensure()
        from dealer.edge import roles

        r = rng.random()
        if r < 0.04 and self.recent:  # delivered again (QoS 1), or retried by its sender
            return rng.choice(self.recent)
        if r < 0.10:
            return TIMER, json.dumps(self._timer(rng)).encode()
        doc = self._command(rng)
        role = roles.SENDER.get(str(doc.get("type")), roles.Role.PLAYER_PLATFORM)
        doc = self._address(doc, rng)
        if rng.random() < 0.05:
            role = rng.choice((roles.Role.PLAYER_PLATFORM, roles.Role.STATION))
        if rng.random() < 0.08:
            doc = mutate_tree(doc, rng, self.corpus.keys, self.corpus.strings)
        inp = (roles.command_topic(role, TID), encode_text(dump_json(doc))[:MAX_INPUT])
        self.recent = (self.recent + [inp])[-20:]
        return inp

    def _timer(self, rng: random.Random) -> dict[str, Any]:
        """A timer's event: the current turn's or window's (it acts for the player), or a stale one."""
        cur = self.table.current
        turn = cur.turn if cur is not None and cur.turn else 1
        deadline = cur.action_deadline if cur is not None else None
        r = rng.random()
        if r < 0.15:
            deadline = rng.choice((None, (deadline or self.now) + rng.choice((-1, 1, 1000))))
        if rng.random() < 0.25:
            turn = max(1, turn + rng.choice((-1, -1, 1, 2)))
        if cur is not None and cur.confirm_deadline is not None and rng.random() < 0.7:
            step = cur.expected_position or "LAST_CARD"
            return {"type": "confirm_timeout", "step": step if rng.random() < 0.8 else "SHUFFLE",
                    "deadline": cur.confirm_deadline if r >= 0.15 else deadline}
        if rng.random() < 0.05:
            return {"type": "decision_timeout", "deadline": deadline}
        return {"type": "action_timeout", "turn": turn, "deadline": deadline}

    def _command(self, rng: random.Random) -> dict[str, Any]:
        from dealer.core.round import Phase

        cur = self._round()
        phase = cur.phase if cur is not None else None
        r = rng.random()
        if phase == Phase.ACTION:
            if r < 0.45:
                return self._act(rng, cur, cur.hand.to_act, valid=True)
            if r < 0.57:
                others = [p for p in self.players if p != cur.hand.to_act]
                return self._act(rng, cur, rng.choice(others), valid=rng.random() < 0.7)
            if r < 0.74:
                return self._act(rng, cur, cur.hand.to_act, valid=False)
            if r < 0.84:
                return self._reserve(rng, cur)
            if r < 0.88:
                return self._bet(rng, cur)
            return self._station(rng, cur)
        if phase == Phase.BETTING_OPEN:
            if r < 0.55:
                return self._bet(rng, cur)
            if r < (0.70 if len(cur.seat_owner) >= cur.rules.game.min_players else 0.58):
                return {"type": "close_betting", "by": "dealer" if rng.random() < 0.95 else "timer"}
            if r < 0.82:
                return self._act(rng, cur, rng.choice(self.players), valid=False)
            if r < 0.88:
                return self._reserve(rng, cur)
            return self._station(rng, cur)
        if phase is not None:  # dealing, a confirmation held open for the station
            if r < 0.55:
                return self._station(rng, cur)
            if r < 0.75:
                return self._act(rng, cur, rng.choice(self.players), valid=False)
            if r < 0.85:
                return self._reserve(rng, cur)
            return self._bet(rng, cur)
        if r < 0.4:  # between rounds: everything is for a round that is over
            return self._act(rng, None, rng.choice(self.players), valid=False)
        if r < 0.7:
            return self._bet(rng, None)
        return self._station(rng, None)

    def _address(self, doc: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        """Name the command as a client does: a fresh id, the round, the turn; now and then an
        id used before, an earlier round or turn, or nothing (refused)."""
        cur = self.table.current
        r = rng.random()
        if r < 0.04:  # an id that spells a card: answered like any other, whether the card is hidden or not
            doc["command_id"] = rng.choice(("", "c-", "x.")) + self._a_card(rng)
            self.recent_ids = (self.recent_ids + [doc["command_id"]])[-20:]
        elif r < 0.88 or not self.recent_ids:
            doc["command_id"] = f"fz-{rng.getrandbits(48):012x}"
            self.recent_ids = (self.recent_ids + [doc["command_id"]])[-20:]
        elif r < 0.97:
            doc["command_id"] = rng.choice(self.recent_ids)
        if doc.get("type") == "dealer_logon":
            return doc
        r = rng.random()
        if r < 0.9:
            doc["round_id"] = self._round_id()
        elif r < 0.96 and self.last_rounds:
            doc["round_id"] = rng.choice(self.last_rounds)
        elif r < 0.98:
            doc["round_id"] = rng.choice(("G2-000001", f"{TID}-999999", self._round_id() + "x", self._a_card(rng),
                                          f"{TID}-{self._a_card(rng)}"))
        if doc.get("type") == "player_action" and not doc.get("reserve"):
            turn = cur.turn if cur is not None and cur.turn else 1
            r = rng.random()
            if r < 0.84:
                doc["turn"] = turn
            elif r < 0.97:
                doc["turn"] = max(1, turn + rng.choice((-2, -1, -1, 1)))
        elif doc.get("reserve") and rng.random() < 0.1 and cur is not None:
            doc["turn"] = cur.turn or 1
        return doc

    def _a_card(self, rng: random.Random) -> str:
        """A card code of the game: of the round in play (registered, hidden or not) mostly."""
        cur = self.table.current
        dealt = sorted(cur.cards.values()) if cur is not None else []
        return rng.choice(dealt) if dealt and rng.random() < 0.8 else rng.choice(self.deck)

    @property
    def deck(self) -> list[str]:
        return sorted(self.table.rules.game.deck)

    def _bet(self, rng: random.Random, cur: Any) -> dict[str, Any]:
        """A player sits down (a ``chips`` bet naming a seat): mostly valid, else a seat taken, a
        seat the table does not have, a stake too small or not of the money unit, a second buy-in."""
        seated = cur.seat_owner if cur is not None else {}
        free = [s for s in range(1, self.seats + 1) if s not in seated]
        player = rng.choice([p for p in self.players if p not in seated.values()] or list(self.players))
        seat = rng.choice(free) if free else rng.randint(1, self.seats)
        stake, bet_type = rng.choice(self.stakes), self.chips_bet
        r = rng.random()
        if r < 0.10 and seated:
            seat = rng.choice(list(seated))
        elif r < 0.18 and seated:
            player = rng.choice(list(seated.values()))
        elif r < 0.26:
            stake = rng.choice(self.bad_stakes)
        elif r < 0.30:
            seat = rng.choice((self.seats + 1, 99))
        elif r < 0.34:
            bet_type = rng.choice(("ante", "player_a", "cover" if self.chips_bet == "chips" else "chips"))
        bet_id = f"b-{rng.getrandbits(32):08x}" if rng.random() < 0.95 else self._a_card(rng)
        if rng.random() < 0.03:  # a player whose id spells a card
            player = self._a_card(rng)
        doc: dict[str, Any] = {"type": "place_bet", "bet_id": bet_id, "player_id": player,
                               "bet_type": bet_type, "stake": stake, "seat": seat}
        if rng.random() < 0.03:
            del doc["seat"]
        return doc

    def _act(self, rng: random.Random, cur: Any, player: str | None, *, valid: bool) -> dict[str, Any]:
        """``player``'s answer to the turn running: legal, or well formed but wrong."""
        player = player or rng.choice(self.players)
        if not valid and rng.random() < 0.05:
            player = self._a_card(rng)
        turn = cur.hand.turn_options() if cur is not None and cur.hand is not None and cur.hand.to_act else {}
        fields = self.valid_action(rng, turn) if valid and turn else self.wrong_action(rng, turn)
        return {"type": "player_action", "player_id": player, **fields}

    def _reserve(self, rng: random.Random, cur: Any) -> dict[str, Any]:
        """A reservation (Seotda's §6.2; refused in the other games): by a player who is not to
        act, or at the wrong moment."""
        seated = self._seated(cur)
        player = rng.choice(seated if seated and rng.random() < 0.85 else list(self.players))
        doc = {"type": "player_action", "player_id": player, "reserve": True,
               "action": rng.choice(self.reserve_actions)}
        if rng.random() < 0.1:
            doc["amount"] = rng.choice(("10", "1.00", "0"))
        return doc

    reserve_actions: tuple[str, ...] = ("CHECK", "CALL", "FOLD", "BET", "RAISE")

    def _station(self, rng: random.Random, cur: Any) -> dict[str, Any]:
        """The dealer station: a confirmation (of the step awaited, or another), an exposed card,
        closing the betting, a dealer's log-on."""
        awaited = cur.expected_position if cur is not None else None
        r = rng.random()
        if r < 0.45:
            step = awaited if awaited and rng.random() < 0.7 else rng.choice(("SHUFFLE", "WASH", "LAST_CARD", "DEAL"))
            return {"type": "dealer_confirm", "step": step}
        if r < 0.75:
            return {"type": "card_exposed", "position": self.exposed_position(rng, cur)}
        if r < 0.9:
            return {"type": "close_betting", "by": "dealer"}
        return {"type": "dealer_logon", "dealer_id": rng.choice(("d-ana", "d-bo", "AS", "01G"))}

    # -- the game's part (overridden) ----------------------------------------------------

    def valid_action(self, rng: random.Random, turn: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def wrong_action(self, rng: random.Random, turn: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def exposed_position(self, rng: random.Random, cur: Any) -> str:
        return rng.choice(("P1.7", "P2.3", "S1.2", "F.1", "BURN1"))

    def card_for(self, cur: Any, pos: Any) -> str | None:
        """A card the deck may give at ``pos`` now (None: the shoe's next)."""
        return None

    def check_result(self, result: Any) -> None:
        raise NotImplementedError

    # -- checking ------------------------------------------------------------------------------
