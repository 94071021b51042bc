"""A client's reading of a table's ``state`` topic (protocol 2, docs/mqtt-topics.md §4.8).

A table's public path is one retained message per committed batch: the state, the current
station prompt, and the round events and prompts of the batch it follows. A client that stays
subscribed gets every state, so it misses no event or prompt; one that (re)subscribes first
gets the retained copy, whose events and prompts are the last batch's again. :class:`Feed`
hands each state's events and prompts on once: a state whose ``version`` is not above the
last one seen of its table (a retained copy seen before, a redelivery) brings nothing new.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dealer.edge import topics

Handler = Callable[[str, bytes], None]


@dataclass(frozen=True, slots=True)
class News:
    """What one state message brings: the state itself (None: cleared or unreadable), and the
    events and prompts it carries that this client has not seen yet."""

    state: dict[str, Any] | None
    events: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)


def parse_state(payload: bytes) -> dict[str, Any] | None:
    """A state message as JSON, or None (an empty retained payload, or not a state)."""
    if not payload:
        return None
    try:
        msg = json.loads(payload)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) and msg.get("schema_id") == "studio.v1.table_state" else None


class Feed:
    """Per table, the highest state ``version`` seen: each state's news is handed on once; the
    first state seen of a table also hands on its current prompt when it carries none."""

    def __init__(self) -> None:
        self.versions: dict[str, int] = {}

    def read(self, payload: bytes) -> News:
        state = parse_state(payload)
        if state is None:
            return News(None)
        tid, version = str(state.get("table_id")), state.get("version")
        seen = self.versions.get(tid)
        if not isinstance(version, int) or (seen is not None and version <= seen):
            return News(state)
        self.versions[tid] = version
        events = [e for e in state.get("events") or [] if isinstance(e, dict)]
        prompts = [p for p in state.get("prompts") or [] if isinstance(p, dict)]
        if not prompts and seen is None and isinstance(state.get("prompt"), dict):
            prompts = [state["prompt"]]  # the first state seen of the table: its current prompt
        return News(state, events, prompts)


def events_of(handler: Handler) -> Handler:
    """A ``state`` handler that hands each new round event a state carries to ``handler``, as
    one message of the table's events (its topic and JSON): for a part written for protocol 1's
    live ``events`` stream."""
    feed = Feed()

    def on_state(topic: str, payload: bytes) -> None:
        tid = topics.table_of(topic)
        for ev in feed.read(payload).events:
            handler(topics.events(tid or str(ev.get("table_id"))), json.dumps(ev).encode())

    return on_state


def prompts_of(handler: Handler) -> Handler:
    """A ``state`` handler that hands each new station prompt a state carries to ``handler``
    (the table's state topic and the prompt's JSON): what protocol 1's live ``prompts`` gave."""
    feed = Feed()

    def on_state(topic: str, payload: bytes) -> None:
        for prompt in feed.read(payload).prompts:
            handler(topic, json.dumps(prompt).encode())

    return on_state


__all__ = ["Feed", "News", "events_of", "parse_state", "prompts_of"]
