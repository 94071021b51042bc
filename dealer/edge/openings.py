"""A round's opening: the edge data the core never makes, made when the event is applied.

A round's id, its betting deadline and its secret random draw (from the OS CSPRNG) are the
edge's; they are journaled with the OpenRound, so a replay needs no edge.
"""

from __future__ import annotations

import secrets
from typing import Any

from dealer.core.draws import DRAW_BYTES
from dealer.core.events import Event, OpenRound, SupervisorOpenRound, SupervisorResume
from dealer.core.table import Table
from dealer.edge.config import TableConfig


def opening(table: Table, cfg: TableConfig, at: int, **signed: Any) -> OpenRound:
    """The table's next round opening at ``at``, with the edge data the core never makes: the
    round id, the betting deadline, and the round's secret random draw from the OS CSPRNG.
    ``signed``: the fields of the supervisor's command that asked for it."""
    return OpenRound(round_id=table.next_round_id(), at=at, context=table.memory,
                     betting_closes_at=at + int(cfg.betting_seconds * 1000),
                     draw=secrets.token_hex(DRAW_BYTES), dealer=table.dealer, **signed)


def edge_data(table: Table, cfg: TableConfig, ev: Event | SupervisorOpenRound) -> Event:
    """A supervisor's open request becomes the round's OpenRound; a resume carries the new
    betting deadline (used if the round in play still takes bets). Made when the event is
    applied, so they follow the table as it is then, and journaled, so a replay needs no edge."""
    if isinstance(ev, SupervisorOpenRound):
        signed = ev.model_dump(include={"supervisor", "command_id", "issued_at", "signature", "reason"})
        return opening(table, cfg, ev.at, **signed)
    if isinstance(ev, SupervisorResume) and ev.betting_closes_at is None:
        return ev.model_copy(update={"betting_closes_at": ev.at + int(cfg.betting_seconds * 1000)})
    return ev
