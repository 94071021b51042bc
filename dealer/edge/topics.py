"""Versioned MQTT topic names (``docs/mqtt-topics.md``)."""

from __future__ import annotations

from dealer.core.visibility import PUBLIC, SETTLEMENT, STATION, player as player_audience

PREFIX = "studio/v1"


def table_topic(table_id: str, leaf: str) -> str:
    return f"{PREFIX}/tables/{table_id}/{leaf}"


def results(table_id: str) -> str:
    return table_topic(table_id, "results")


def results_ack(table_id: str) -> str:
    """Settlement's acknowledgements: a result leaves the outbox when its key is acknowledged here."""
    return table_topic(table_id, "results/ack")


def events(table_id: str) -> str:
    return table_topic(table_id, "events")


def state(table_id: str) -> str:
    """The table's round state (public), retained: phase, round, position, deadlines, public cards."""
    return table_topic(table_id, "state")


def actions(table_id: str) -> str:
    """The player platform's commands (bets, decisions, player actions)."""
    return table_topic(table_id, "actions")


def scanner(table_id: str) -> str:
    return table_topic(table_id, "scanner")


def station(table_id: str) -> str:
    """The dealer station's commands (close betting, confirmations, exposed cards)."""
    return table_topic(table_id, "station")


def supervisor(table_id: str) -> str:
    """Signed supervisor commands (void, table operations)."""
    return table_topic(table_id, "supervisor")


def player(table_id: str, player_id: str) -> str:
    """One player's private topic: replies to their actions and their hole cards."""
    return table_topic(table_id, f"players/{player_id}")


def history(table_id: str) -> str:
    """The table's last rounds and per-dealer figures (public cards only), retained: replaced when a
    round ends or a dealer logs on, so a screen opened mid-shift has them at once."""
    return table_topic(table_id, "history")


def player_state(table_id: str, player_id: str) -> str:
    """One player's private round state, retained (only that player may read it); cleared with an
    empty retained payload once the player's round is settled."""
    return table_topic(table_id, f"players/{player_id}/state")


def backend_status(node_id: str) -> str:
    return f"{PREFIX}/backends/{node_id}/status"


def backend_journal(node_id: str) -> str:
    """The backend's journal anchor (retained): head row id and hash, segment count."""
    return f"{PREFIX}/backends/{node_id}/journal"


def backend_of(topic: str) -> str | None:
    """The node of a backend topic ``studio/v1/backends/{node}/{leaf}``, else None."""
    parts = topic.split("/")
    return parts[3] if len(parts) == 5 and f"{parts[0]}/{parts[1]}" == PREFIX and parts[2] == "backends" else None


def parse(topic: str) -> tuple[str, str] | None:
    """``(table, leaf)`` of a table topic ``studio/v1/tables/{table}/{leaf}`` (the leaf may hold
    ``/``: ``players/p/state``), else None. Every table topic the edge reads is parsed here."""
    parts = topic.split("/")
    if len(parts) >= 5 and parts[0] == "studio" and parts[1] == "v1" and parts[2] == "tables":
        return parts[3], "/".join(parts[4:])
    return None


def table_of(topic: str) -> str | None:
    """The table a table topic belongs to, else None."""
    parsed = parse(topic)
    return parsed[0] if parsed is not None else None


def kind(topic: str) -> str:
    """What a topic is, without its table, player or node: ``events``, ``state``,
    ``players/+``, ``players/+/state``, ``backends/+/status``... (counts by kind); else the topic."""
    parsed = parse(topic)
    if parsed is not None:
        leaf = parsed[1].split("/")
        if len(leaf) >= 2 and leaf[0] == "players":
            return "/".join(["players", "+", *leaf[2:]])
        return parsed[1]
    node = backend_of(topic)
    return f"backends/+/{topic.rsplit('/', 1)[1]}" if node is not None else topic


def scanner_table(topic: str) -> str | None:
    """The table of a scanner topic (``studio/v1/tables/{table}/scanner``), else None."""
    parsed = parse(topic)
    return parsed[0] if parsed is not None and parsed[1] == "scanner" else None


#: Table topic leaves (after ``studio/v1/tables/{table}/``) and their audiences.
_LEAF_AUDIENCE = {"events": PUBLIC, "state": PUBLIC, "history": STATION, "results": SETTLEMENT}


def audience(topic: str) -> str | None:
    """The audience of a table topic (``.../events`` and the retained ``.../state`` -> public,
    ``.../history`` -> station, ``.../players/p`` and
    ``.../players/p/state`` -> player p), or None for a topic that carries no round messages."""
    parsed = parse(topic)
    if parsed is None:
        return None
    leaf = parsed[1].split("/")
    if len(leaf) >= 2 and leaf[0] == "players":  # a player id never holds a "/"
        return player_audience(leaf[1])
    return _LEAF_AUDIENCE.get(parsed[1])
