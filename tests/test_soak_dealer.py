"""The soak's virtual dealer under a loaded backend: a backlog of refusals is not a reason to
put good cards aside (the soak's Matgo shoe ran dry, 48 cards for 48 positions)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from dealer.core.messages import StationPrompt
from simulators.shoe import VirtualShoe
from simulators.station import ShoeLink, VirtualDealer


class _Wire(ShoeLink):
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    async def send(self, chunks: Sequence[bytes]) -> None:
        self.chunks += chunks


def _prompt(kind: str, step: int, count: int | None = None) -> bytes:
    return StationPrompt(table_id="T1", round_id="T1-000001", kind=kind, position=f"P{step}", step=step, of=10,  # type: ignore[arg-type]
                         reason="duplicate_card" if kind == "RESCAN" else None, count=count,
                         message="a face-down card already dealt" if kind == "RESCAN" else "deal", at=step
                         ).model_dump_json().encode()


async def test_a_backlog_of_duplicate_refusals_keeps_the_fresh_card_in_hand() -> None:
    """The station registered AS, then refused the dealer's earlier re-passes of AS at the next
    position, three times: those refusals wait in the queue behind the prompt for position 2. The
    dealer takes KS for position 2 and must keep it (it never registered anywhere), not put KS,
    QS and JS aside one refusal after the other."""
    deck = ["AS", "KS", "QS", "JS", "TS", "9S"]
    dealer = VirtualDealer("T1", VirtualShoe("R1"), _Wire(), deck=deck, scripted_rounds=[deck],
                           deal_interval=0.0, heartbeat_interval=60, patience=60)
    task = asyncio.create_task(dealer.run())
    try:
        dealer.on_prompt("t", _prompt("NEXT", 1))
        for _ in range(100):
            await asyncio.sleep(0.001)
            if dealer.in_hand == "AS":
                break
        for payload in (_prompt("NEXT", 2), _prompt("RESCAN", 2, 3), _prompt("RESCAN", 2, 4), _prompt("RESCAN", 2, 5)):
            dealer.on_prompt("t", payload)
        for _ in range(200):
            await asyncio.sleep(0.001)
            if dealer._prompts.empty():
                break
        await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert dealer.dealt == ["AS"]
    assert dealer.in_hand == "KS" and dealer.set_aside == 0
    assert dealer.shoe.deck == ["QS", "JS", "TS", "9S"]
    assert dealer.stale_refusals == 3


async def _prompted(dealer: VirtualDealer, *payloads: bytes) -> None:
    """Run the dealer and give it ``payloads`` one by one, each once it has taken the one before."""
    task = asyncio.create_task(dealer.run())
    try:
        for payload in payloads:
            dealer.on_prompt("t", payload)
            for _ in range(100):
                await asyncio.sleep(0.001)
                if dealer._prompts.empty():
                    break
            await asyncio.sleep(0.005)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_refusal_of_an_extra_pass_is_not_answered_with_one_more() -> None:
    """Under load the dealer passed AS twice; AS registered at position 1 and its second pass was
    refused at position 2, where the dealer now holds KS (passed once, right). Passing KS again
    for that refusal puts one more extra pass on the line (refused at position 3, and so on), and
    after three refusals a good card is put aside: the soak's Matgo shoe ran dry that way."""
    deck = ["AS", "KS", "QS", "JS"]
    wire = _Wire()
    dealer = VirtualDealer("T1", VirtualShoe("R1"), wire, deck=deck, scripted_rounds=[deck],
                           deal_interval=0.0, heartbeat_interval=60, patience=60)
    await _prompted(dealer, _prompt("NEXT", 1), _prompt("NEXT", 2), _prompt("RESCAN", 2, 1))
    assert dealer.dealt == ["AS"] and dealer.in_hand == "KS"
    assert dealer.passes == 2, "KS is not passed again for a refusal of AS's extra pass"
    assert dealer.stale_refusals == 1


async def test_a_card_in_hand_dealt_before_is_put_aside() -> None:
    """A card that registered earlier and came back into the dealer's hand is refused as a
    duplicate for itself: it is put aside and the next card taken."""
    deck = ["AS", "AS", "KS", "QS"]
    dealer = VirtualDealer("T1", VirtualShoe("R1"), _Wire(), deck=deck, scripted_rounds=[deck],
                           deal_interval=0.0, heartbeat_interval=60, patience=60)
    await _prompted(dealer, _prompt("NEXT", 1), _prompt("NEXT", 2), _prompt("RESCAN", 2, 1))
    assert dealer.dealt == ["AS"] and dealer.in_hand == "KS" and dealer.set_aside == 1
