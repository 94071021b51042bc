"""Who may send what: the roles at the backend's edge and the commands each may send.

Every input arrives on a topic that belongs to exactly one role, and the broker's ACL
(``dealer deploy acl``) lets only that role's credentials publish there. The backend checks
again, by the topic a command came on: a command type that is not its role's is refused with
a reason, counted, and changes nothing. This table is the one place that says which role
sends which command; the ACL, the ingress and ``docs/mqtt-topics.md`` follow it.

Pure data and lookups, no IO.
"""

from __future__ import annotations

from enum import StrEnum

from dealer.edge import topics


class Role(StrEnum):
    SCANNER = "scanner"
    STATION = "station"  # the dealer station at one table
    SUPERVISOR = "supervisor"  # a pit boss; every command signed by the supervisor's own key
    PLAYER_PLATFORM = "player_platform"  # the system players bet and decide through
    SETTLEMENT = "settlement"


#: The topic leaf (``studio/v1/tables/{table}/{leaf}``) each sending role publishes on.
COMMAND_TOPIC: dict[Role, str] = {
    Role.SCANNER: "scanner",
    Role.STATION: "station",
    Role.SUPERVISOR: "supervisor",
    Role.PLAYER_PLATFORM: "actions",
}

_ROLE_OF_LEAF = {leaf: role for role, leaf in COMMAND_TOPIC.items()}

#: What settlement publishes: not commands but acknowledgements of applied results
#: (``dealer.core.acks``): a result leaves the backend's outbox only when settlement acknowledges it.
ACK_TOPIC: dict[Role, str] = {Role.SETTLEMENT: "results/ack"}

#: The command types each role may send (scanner frames are not commands: drivers read them).
COMMANDS: dict[Role, frozenset[str]] = {
    Role.PLAYER_PLATFORM: frozenset({"place_bet", "player_decision", "player_action"}),
    Role.STATION: frozenset({"close_betting", "dealer_confirm", "card_exposed", "dealer_logon"}),
    # a supervisor's void, the table operations (dealer.core.operations) and the corroboration of an
    # exposed card the station reported: never a station's, whose credentials are at the table
    # (least privilege: the dealer asks the pit boss)
    Role.SUPERVISOR: frozenset({"supervisor_void", "supervisor_open_round", "supervisor_pause", "supervisor_resume",
                                "supervisor_close", "supervisor_reopen", "supervisor_expose"}),
    Role.SCANNER: frozenset(),
    Role.SETTLEMENT: frozenset(),
}

#: Which role sends each command type.
SENDER: dict[str, Role] = {cmd: role for role, cmds in COMMANDS.items() for cmd in cmds}

#: Commands about the table, not a round: they carry no ``round_id`` (a dealer's log-on; the
#: supervisor's table operations are signed commands with their own envelope, dealer.edge.signing).
TABLE_COMMANDS = frozenset({"dealer_logon"})

#: Commands that name a turn besides their round (an action for a turn that is over is refused).
TURN_COMMANDS = frozenset({"player_action"})

ROLE_TEXT = {
    Role.SCANNER: "a scanner",
    Role.STATION: "the dealer station",
    Role.SUPERVISOR: "a supervisor",
    Role.PLAYER_PLATFORM: "the player platform",
    Role.SETTLEMENT: "settlement",
}


#: Broker user names (``dealer deploy acl``): fixed ones, and per-table / per-supervisor prefixes.
BACKEND_USER, SETTLEMENT_USER, PLAYER_PLATFORM_USER, OPS_USER = "dealer-backend", "settlement", "player-platform", "ops"
SCANNER_PREFIX, STATION_PREFIX, SUPERVISOR_PREFIX = "scanner-", "station-", "supervisor-"
#: The auditor (reads anchors and the public record) and the simulation rig (docs/rig.md): not
#: command roles, but broker users all the same, so no player may be named like them.
AUDITOR_USER, RIG_USER = "auditor", "rig"


def is_role_user(name: str) -> bool:
    """A broker user name a role logs in with: no player may be called like one (a player's
    client logs in with its player id, and the ACL lets it read its own player topic)."""
    return (name in (BACKEND_USER, SETTLEMENT_USER, PLAYER_PLATFORM_USER, OPS_USER, AUDITOR_USER, RIG_USER)
            or name.startswith((SCANNER_PREFIX, STATION_PREFIX, SUPERVISOR_PREFIX)))


def command_topic(role: Role, table_id: str) -> str:
    return topics.table_topic(table_id, COMMAND_TOPIC[role])


def role_of_topic(topic: str) -> tuple[str, Role] | None:
    """``(table, role)`` for a command topic ``studio/v1/tables/{table}/{leaf}``, else None."""
    parsed = topics.parse(topic)
    if parsed is None or "/" in parsed[1]:
        return None
    role = _ROLE_OF_LEAF.get(parsed[1])
    return (parsed[0], role) if role is not None else None


def wrong_role(command: str, role: Role, table_id: str) -> str | None:
    """Why ``role`` may not send ``command``, or None when it may."""
    if command in COMMANDS[role]:
        return None
    owner = SENDER.get(command)
    if owner is None:
        return f"unknown command type {command[:32]!r}"
    return (f"{command} is {ROLE_TEXT[owner]}'s command and is not accepted from {ROLE_TEXT[role]}: "
            f"{ROLE_TEXT[owner]} sends it on {command_topic(owner, table_id)}")


__all__ = ["ACK_TOPIC", "COMMANDS", "COMMAND_TOPIC", "ROLE_TEXT", "Role", "SENDER", "TABLE_COMMANDS", "TURN_COMMANDS", "command_topic",
           "role_of_topic", "wrong_role"]
