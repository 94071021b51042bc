"""Test harness: hypothesis strategies over the standard 52-card deck (any card, three-card hands,
the six cards of a two-hand deal, suit renamings) and a hand with its suits renamed, for the
property tests of the 52-card games."""

from __future__ import annotations

from hypothesis import strategies as st

from dealer.core.cards import STANDARD_52

cards = st.sampled_from(STANDARD_52)
hand3 = st.lists(cards, min_size=3, max_size=3, unique=True)
six_cards = st.lists(cards, min_size=6, max_size=6, unique=True)
suit_maps = st.permutations("SHDC").map(lambda p: dict(zip("SHDC", p)))


def rename(codes: list[str], suits: dict[str, str]) -> list[str]:
    return [c[0] + suits[c[1]] for c in codes]
