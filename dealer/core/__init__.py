"""The pure core: the round machine, betting, money, cards, events, wire messages, results,
visibility. No IO, no clock, no imports from the edge, the CLI or the tools (tests/test_layout.py)."""
