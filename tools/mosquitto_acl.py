"""The Mosquitto ACL rendered from a config: least privilege, one block per broker user.

Mosquitto's ``pattern`` lines substitute the WHOLE user name (``%u``) or client id (``%c``), so
a user named ``scanner-TP1`` cannot be mapped to the topic segment ``TP1`` by a pattern;
explicit per-table blocks are generated instead. Below ``tools/deploy.py`` (the CLI),
``tools/broker_acls.py`` (the same roles for RabbitMQ and NATS) and ``tools/broker_users.py``
(the passwords), which all read the users and grants from here.
"""

from __future__ import annotations

from dealer.edge import topics
from dealer.edge.config import Settings

from dealer.edge.roles import (ACK_TOPIC, AUDITOR_USER, BACKEND_USER, OPS_USER, RIG_USER, PLAYER_PLATFORM_USER, SCANNER_PREFIX, SETTLEMENT_USER,
                          STATION_PREFIX, SUPERVISOR_PREFIX, Role)


def scanner_user(table_id: str) -> str:
    return f"{SCANNER_PREFIX}{table_id}"


def station_user(table_id: str) -> str:
    return f"{STATION_PREFIX}{table_id}"


def supervisor_user(supervisor_id: str) -> str:
    return f"{SUPERVISOR_PREFIX}{supervisor_id}"


_ALL = "+"

_HEADER = """\
# Mosquitto ACL for the studio's MQTT protocol (docs/mqtt-topics.md).
#
# Rendered by `dealer deploy acl --config FILE` from the tables of FILE: re-render it
# whenever a table is added or removed, then reload the broker (SIGHUP). Every user below
# needs a line in the password file (mosquitto_passwd).{source}
#
# Format: a "user <name>" line starts a block; "topic read|write|readwrite <filter>"
# lines grant access to that user. Anything not granted is denied: a publish to a topic
# the user may not write is DROPPED (MQTT 3.1.1 still acknowledges it; nobody receives
# it), a subscription to a topic it may not read receives nothing. Only users with a
# password in the password file can connect (allow_anonymous false).
#
# "read" covers subscribing and receiving; "write" covers publishing, including the
# backend's retained status message and its last will.
"""


def users_of(settings: Settings, *, rig: bool = False) -> list[str]:
    """Every broker user the ACL of ``settings`` names, in its order (players log in by their
    own id through the player platform's provisioning, not here)."""
    out = [BACKEND_USER, SETTLEMENT_USER, PLAYER_PLATFORM_USER]
    out += [scanner_user(tc.id) for tc in settings.tables if tc.scanner.kind == "mqtt"]
    out += [station_user(tc.id) for tc in settings.tables]
    out += [supervisor_user(sup.id) for sup in settings.security.supervisors]
    out += [OPS_USER, AUDITOR_USER] + ([RIG_USER] if rig else [])
    return out


def render_acl(settings: Settings, *, source: str | None = None, rig: bool = False) -> str:
    """The Mosquitto ACL for ``settings``: fixed users (backend, settlement, player
    platform, ops, auditor), one ``station-<table>`` block per table, one ``scanner-<table>`` block
    per table whose scanner reports over MQTT (``kind = "mqtt"``), one ``supervisor-<id>``
    block per configured supervisor and, with ``rig``, the simulation rig's user. It follows
    ``dealer.edge.roles``."""
    t = topics.table_topic
    out: list[str] = [_HEADER.format(source=f"\n# Rendered from: {source}" if source else "")]

    def block(comment: str, user: str, grants: list[tuple[str, str]]) -> None:
        out.append(comment)
        out.append(f"user {user}")
        out.extend(f"topic {access} {topic}" for access, topic in grants)
        out.append("")

    block("# --- The table backend (dealer run) ---------------------------------------------------------\n"
          "# Reads every role's command topic (scanners, the player platform, stations, supervisors),\n"
          "# writes everything a table produces, players' private topics included, its own\n"
          "# retained status and journal anchor (read back at start: a journal behind it is refused), and the\n"
          "# retained messages (each table's state, which carries its prompt and round events, its history,\n"
          "# each player's state). Its live events are refusals only. It checks each\n"
          "# command's role again (dealer/edge/roles.py).\n"
          "# It reads settlement's acknowledgements: a result leaves its outbox only when acknowledged.",
          BACKEND_USER,
          [("read", t(_ALL, "scanner")), ("read", t(_ALL, "actions")), ("read", t(_ALL, "station")),
           ("read", t(_ALL, "supervisor")), ("read", t(_ALL, ACK_TOPIC[Role.SETTLEMENT])),
           ("write", t(_ALL, "events")), ("write", t(_ALL, "results")),
           ("write", t(_ALL, "players/+")), ("write", topics.state(_ALL)), ("write", topics.history(_ALL)),
           ("write", topics.player_state(_ALL, _ALL)), ("write", topics.backend_status(_ALL)),
           ("readwrite", topics.backend_journal(_ALL))])

    block("# --- Settlement ------------------------------------------------------------------------------\n"
          "# Reads round results (persistent session, dedupe by idempotency_key) and acknowledges\n"
          "# each one it has applied (results/ack; only settlement may), and nothing else: it\n"
          "# cannot place bets, deal cards or impersonate the backend.",
          SETTLEMENT_USER,
          [("read", t(_ALL, "results")), ("write", t(_ALL, ACK_TOPIC[Role.SETTLEMENT]))])

    block("# --- Player platform ---------------------------------------------------------------------------\n"
          "# Sends players' bets, decisions and actions (actions: its own command topic) and follows\n"
          "# the tables' retained state (round events included), their refusals (events) and the\n"
          "# backends' liveness. It cannot close betting, confirm a deal step, report an exposed card or\n"
          "# void a round: those topics are not its own.",
          PLAYER_PLATFORM_USER,
          [("write", t(_ALL, "actions")), ("read", t(_ALL, "events")), ("read", topics.state(_ALL)),
           ("read", topics.backend_status(_ALL))])

    out.append("# --- Scanner gateways, one user per table: scanner-<table> ----------------------------------\n"
               "# A gateway may publish reads for ITS OWN table only; a publish anywhere else is dropped.\n"
               "# Tables whose scanner is on a serial line have no scanner user.\n")
    mqtt_tables = [tc for tc in settings.tables if tc.scanner.kind == "mqtt"]
    for tc in mqtt_tables:
        block(f"# {tc.id}: reader {tc.scanner.reader_id}", scanner_user(tc.id), [("write", topics.scanner(tc.id))])
    if not mqtt_tables:
        out.append("# (no table has an MQTT scanner)\n")

    out.append("# --- Dealer stations, one user per table: station-<table> ------------------------------------\n"
               "# A station shows its table's prompt and follows its round (both in the retained state, the\n"
               "# latest of which it gets when it connects), its refusals (events) and the backends' liveness\n"
               "# (a retained state is current only while its backend is online) and sends the dealer's\n"
               "# commands (close betting, WASH/SHUFFLE confirmations, exposed cards, a dealer's log-on) for\n"
               "# ITS OWN table only; its table's history (last rounds, per-dealer figures) too.\n")
    for tc in settings.tables:
        block(f"# {tc.id}", station_user(tc.id),
              [("read", topics.events(tc.id)), ("write", topics.station(tc.id)),
               ("read", topics.state(tc.id)), ("read", topics.history(tc.id)),
               ("read", topics.backend_status(_ALL))])
    if not settings.tables:
        out.append("# (no tables)\n")

    out.append("# --- Supervisors, one user per supervisor: supervisor-<id> ------------------------------------\n"
               "# A supervisor's console sends signed commands (void) for the tables the supervisor may act\n"
               "# on, and follows their state (prompt and round events) and refusals. The broker login alone\n"
               "# is not enough: the backend refuses any supervisor command not signed with that supervisor's\n"
               "# own key.\n")
    sups = list(getattr(getattr(settings, "security", None), "supervisors", []) or [])
    for sup in sups:
        tables = list(sup.tables) or [tc.id for tc in settings.tables]
        grants: list[tuple[str, str]] = []
        for tid in tables:
            grants += [("write", topics.supervisor(tid)), ("read", topics.events(tid)),
                       ("read", topics.state(tid)), ("read", topics.history(tid))]
        grants.append(("read", topics.backend_status(_ALL)))
        block(f"# {sup.id}: tables {', '.join(tables) or '(none)'}", supervisor_user(sup.id), grants)
    if not sups:
        out.append("# (no supervisors configured: [[security.supervisors]])\n")

    block("# --- Operations (dashboards, debugging with mosquitto_sub) ---------------------------------\n"
          "# Read-only, and only what operations needs: every table's refusals (events) and results, the\n"
          "# retained table states (with the station prompt and round events) and histories, the\n"
          "# backends' status and journal anchors (an auditor's `dealer audit verify --anchor`) and the\n"
          "# broker's own $SYS statistics. NOT the players' private topics (hole cards) and not the\n"
          "# command topics.",
          OPS_USER,
          [("read", t(_ALL, "events")), ("read", t(_ALL, "results")),
           ("read", topics.state(_ALL)), ("read", topics.history(_ALL)),
           ("read", topics.backend_status(_ALL)), ("read", topics.backend_journal(_ALL)), ("read", "$SYS/#")])

    block("# --- Auditor (dealer audit verify --anchor-from-broker) ----------------------------------------\n"
          "# Read-only: the backends' retained journal anchors and status, and the tables' public record\n"
          "# (states with their round events, refusals, results, history). Never the players' private\n"
          "# topics or any command topic.",
          AUDITOR_USER,
          [("read", topics.backend_journal(_ALL)), ("read", topics.backend_status(_ALL)), ("read", t(_ALL, "events")),
           ("read", topics.state(_ALL)), ("read", t(_ALL, "results")), ("read", topics.history(_ALL))])

    if rig:
        block("# --- The simulation rig (dealer simulate, docs/rig.md): NOT a production role -----------------\n"
              "# A test bench plays every table's scanner gateway, dealer station and players at once: it\n"
              "# publishes reads, station commands and players' actions and reads what each of them reads.\n"
              "# Render it only for a rig's broker (dealer deploy acl --rig).",
              RIG_USER,
              [("write", t(_ALL, "scanner")), ("write", t(_ALL, "station")), ("write", t(_ALL, "actions")),
               ("read", t(_ALL, "events")),
               ("read", topics.state(_ALL)), ("read", t(_ALL, "players/+")), ("read", topics.player_state(_ALL, _ALL)),
               ("read", topics.backend_status(_ALL))])

    out.append("# --- Players (games with decisions, e.g. Sevenluck) ------------------------------------------\n"
               "# A player's client logs in with its player id as user name and may read only its own\n"
               "# topic and its own retained state, which carry its hole cards (decks.md section 3: nobody\n"
               "# else may see them). No player may be named like a user above (the backend refuses such a\n"
               "# player id). Its bets and decisions go through the player platform on `actions`. A pattern\n"
               "# line applies to every user.")
    out.append(f"pattern read {t(_ALL, 'players/%u')}")
    out.append(f"pattern read {topics.player_state(_ALL, '%u')}")
    return "\n".join(out) + "\n"

