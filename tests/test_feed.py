"""simulators/feed.py: a client's reading of a table's state (protocol 2). Each state's events
and prompts are handed on once (by version); a retained copy seen again, an older state, an
empty (cleared) payload, bad JSON or another message bring nothing new and raise nothing."""

from __future__ import annotations

import json

from simulators.feed import Feed, events_of, parse_state, prompts_of


def _state(version: int, *, events: tuple[str, ...] = (), prompts: tuple[str, ...] = (), prompt: str | None = None,
           table: str = "T1") -> bytes:
    def p(kind: str) -> dict[str, object]:
        return {"schema_id": "studio.v1.prompt", "table_id": table, "kind": kind, "message": kind, "at": 1}

    return json.dumps({"schema_id": "studio.v1.table_state", "table_id": table, "version": version,
                       "prompt": p(prompt) if prompt else None,
                       "events": [{"schema_id": "studio.v1.event", "table_id": table, "event": e, "at": 1}
                                  for e in events],
                       "prompts": [p(k) for k in prompts]}).encode()


def test_each_state_s_news_is_handed_on_once_by_version():
    feed = Feed()
    first = feed.read(_state(5, events=("round_opened",), prompts=("WAIT",), prompt="WAIT"))
    assert [e["event"] for e in first.events] == ["round_opened"] and [p["kind"] for p in first.prompts] == ["WAIT"]
    assert feed.read(_state(5, events=("round_opened",), prompts=("WAIT",))).events == []  # the same again
    assert feed.read(_state(4, events=("card_registered",))).events == []  # older
    nxt = feed.read(_state(6, events=("card_registered",)))
    assert [e["event"] for e in nxt.events] == ["card_registered"] and nxt.prompts == []
    assert feed.read(_state(1, events=("x",), table="T2")).events  # tables are counted apart


def test_the_first_state_seen_gives_its_current_prompt_when_it_carries_none():
    news = Feed().read(_state(9, events=("card_registered",), prompt="NEXT"))
    assert [p["kind"] for p in news.prompts] == ["NEXT"]


def test_bad_or_foreign_payloads_bring_nothing_and_raise_nothing():
    feed = Feed()
    for payload in (b"", b"{", b"[]", b'{"schema_id": "studio.v1.event"}', b'"x"',
                    b'{"schema_id": "studio.v1.table_state", "table_id": "T1", "version": "7"}'):
        news = feed.read(payload)
        assert news.events == [] and news.prompts == []
    assert parse_state(b"") is None and parse_state(b"not json") is None


def test_the_adapters_hand_protocol_1_handlers_one_message_each():
    got: list[tuple[str, dict[str, object]]] = []
    on_events = events_of(lambda t, b: got.append((t, json.loads(b))))
    on_prompts = prompts_of(lambda t, b: got.append((t, json.loads(b))))
    state = _state(3, events=("round_opened", "betting_closed"), prompts=("NEXT",))
    for handler in (on_events, on_prompts):
        handler("studio/v1/tables/T1/state", state)
        handler("studio/v1/tables/T1/state", state)  # a redelivery: nothing more
    assert [(t, m.get("event") or m.get("kind")) for t, m in got] == [
        ("studio/v1/tables/T1/events", "round_opened"), ("studio/v1/tables/T1/events", "betting_closed"),
        ("studio/v1/tables/T1/state", "NEXT")]
