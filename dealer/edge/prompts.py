"""The station prompts the edge makes or words itself, in one place.

The core says what a table waits for (:meth:`~dealer.core.table.Table.prompt_now`); the edge
adds what only it knows: that the journal cannot be written, that a scanner frame was forged,
that a card no deal expects was ignored, and which link a table between rounds waits for.
"""

from __future__ import annotations

from dealer.core.messages import StationPrompt
from dealer.edge.commit_state import JOURNAL_UNAVAILABLE
from dealer.edge.link_state import Links


def journal_alert(tid: str, at: int, *, card: bool = False) -> StationPrompt:
    """The station's ALERT while the journal is unavailable. It names no position: the
    table in memory may be one batch ahead of the journal, and that batch is not published."""
    what = ("this card was NOT registered: keep it aside and pass it again when the station asks for it"
            if card else "no card, bet or decision is taken until it can write again; the round stays as it is")
    return StationPrompt(table_id=tid, kind="ALERT", reason=JOURNAL_UNAVAILABLE, at=at,
                         message=f"journal unavailable: stop dealing. The backend cannot write its journal "
                                 f"(disk full or I/O error): {what}")


def forged_alert(prompt: StationPrompt, reader: str, detail: str) -> StationPrompt:
    """The supervisor's ALERT for a scanner frame that failed authentication, on the table's
    prompt now (it keeps the position the deal stays at)."""
    return prompt.model_copy(update={
        "kind": "ALERT", "reason": "forged_frame", "count": None,
        "message": f"SUPERVISOR: a message from scanner {reader} failed authentication ({detail}); "
                   "it was ignored and registered no card: check the shoe and its cable"})


def card_ignored(tid: str, reason: str, at: int) -> StationPrompt:
    """The dealer passed a card no deal expects: it is ignored, and the station says why."""
    return StationPrompt(table_id=tid, kind="REJECTED", reason="not_expected", message=f"card ignored: {reason}",
                         at=at)


def with_waiting(prompt: StationPrompt, links: Links) -> StationPrompt:
    """A WAIT between rounds says which link it waits for (the prompt unchanged otherwise)."""
    if prompt.kind == "WAIT" and prompt.round_id is None:
        waiting = links.waiting_for()
        if waiting is not None:
            return prompt.model_copy(update={"message": f"waiting for {waiting}"})
    return prompt
