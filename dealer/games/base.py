"""What the game modules share that the core does not need: the strict base of every game's
options (:class:`GameOptions`) and the turns of a hand whose betting rounds run through
:mod:`dealer.core.betting` (:class:`BettingTurns`). The contract a game implements is
:mod:`dealer.core.game_contract`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict

from dealer.core.betting import State
from dealer.core.game_contract import PeerHand
from dealer.core.game_records import BetStep


class GameOptions(BaseModel):
    """Base for per-game house options and pay tables: strict, unknown keys are an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class BettingTurns(PeerHand):
    """The turns of a hand whose betting rounds run through :mod:`dealer.core.betting` (stud,
    Seotda): the :class:`BettingRounds` capability."""

    betting: Any  # dealer.core.betting.Betting

    def open_turns(self, step: BetStep) -> bool:
        return bool(self.betting.open_round(step.first, step.limits) == State.TO_ACT)

    @property
    def to_act(self) -> str | None:
        return self.betting.to_act  # type: ignore[no-any-return]  # betting is held as Any (a core Betting)

    def turn_summary(self) -> dict[str, Any]:
        return {"level": str(self.betting.level)}

    def turn_prompt(self, street: str | None) -> str:
        return f"{street} street betting: {self.to_act} to act (level {self.betting.level}); do not deal"

    def turn_options(self) -> dict[str, Any]:
        return dict(self.betting.options().as_json())

    def do_action(self, player: str, action: str, amount: Decimal | None, card: str | None,
                  by: str) -> tuple[dict[str, Any] | str, bool]:
        if card is not None:
            return f"{action} takes no card in this game", False
        reason = self.betting.verify(player, action, amount)
        if reason is not None:
            return reason, False
        record = self.betting.act(player, action, amount, by="timeout" if by == "timeout" else "player")
        return record.as_json(), self.betting.state == State.TO_ACT

    def default_action(self) -> tuple[str, Decimal | None, str | None]:
        action, amount = self.betting.default_action()
        return str(action), amount, None

    def close_turns(self) -> list[tuple[str, dict[str, Any]]]:
        back = self.betting.close_round()
        return [] if back is None else [("uncalled_returned", {"player_id": back.player_id,
                                                               "amount": str(back.amount)})]
