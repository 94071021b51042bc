"""The roles' broker permissions for RabbitMQ and NATS, equivalent to the Mosquitto ACL.

``dealer deploy acl --broker rabbitmq|nats`` prints them; ``dealer deploy users --broker ...``
writes them with every user's password (tools/broker_users.py). The grants are read from the
Mosquitto ACL that :func:`tools.deploy.render_acl` renders for the same config, so the three
brokers can never grant different things: one role table (``dealer.edge.roles``), three formats.

**RabbitMQ** (its MQTT plugin; docs/brokers.md "Roles on RabbitMQ and NATS"): MQTT topics are
routing keys on the topic exchange ``amq.topic`` with ``/`` as ``.``. A definitions JSON
(``rabbitmqctl import_definitions FILE``) gives each user

* resource permissions for what the plugin itself does: configure, write and read its own
  session queues (``mqtt-subscription-<client id>qos0|1``), write (publish) and read (bind) on
  ``amq.topic``;
* topic permissions on ``amq.topic``: ``write`` is checked against each publish's routing key,
  ``read`` against each subscription's binding key (a filter's ``+`` is ``*``): a subscription
  to a wider filter than granted (``studio/v1/#``) is refused. A role that may not publish or
  read anything gets a pattern that matches nothing: without a topic permission RabbitMQ allows
  every routing key.

**NATS** (its MQTT gateway): topics are subjects with ``/`` as ``.``, ``+`` as ``*`` and ``#`` as
``>``. An ``authorization`` block lists each user with ``publish`` and ``subscribe`` allow
lists; every user that reads also needs ``$MQTT.sub.>`` (the gateway delivers QoS 1 through a
JetStream consumer on ``$MQTT.sub.<id>``, subscribed in the client's name), and every user is
limited to MQTT connections (``allowed_connection_types``), so nobody can subscribe to
``$MQTT.sub.>`` over the NATS protocol and read another session's deliveries. Users the block
does not list get ``default_permissions``: nothing.

Players (a user per player, provisioned by the player platform) read only their own topics:
RabbitMQ expands ``{username}`` in topic permissions, so every player gets the same two
patterns; NATS's config has no such expansion, so each player's user lists its own subjects
(the template is in the rendered header). Mosquitto's ``$SYS/#`` (ops) has no equivalent on
either broker and is left out.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dealer.edge import topics
from dealer.edge.config import Settings

#: (access, MQTT filter): access is "read", "write" or "readwrite" as in the Mosquitto ACL.
Grant = tuple[str, str]

EXCHANGE = "amq.topic"
#: RabbitMQ's MQTT plugin names each session's queue mqtt-subscription-<client id>qos0|1.
QUEUES = r"^mqtt-subscription-.*$"
RESOURCES = r"^(amq\.topic|mqtt-subscription-.*)$"
NEVER = "(?!)"  # a regular expression that matches nothing (PCRE, as RabbitMQ's Erlang re)
#: What a player reads (Mosquitto's ``pattern read`` lines, ``%u`` the player's user name).
PLAYER_FILTERS = (topics.table_topic("+", "players/%u"), topics.player_state("+", "%u"))


def role_grants(settings: Settings, *, rig: bool = False) -> dict[str, list[Grant]]:
    """Every role user of ``settings`` with its grants, in the Mosquitto ACL's order (players'
    pattern lines excepted: :data:`PLAYER_FILTERS`)."""
    from tools.mosquitto_acl import render_acl

    out: dict[str, list[Grant]] = {}
    user: str | None = None
    for line in render_acl(settings, rig=rig).splitlines():
        if line.startswith("user "):
            user = line.split(" ", 1)[1]
            out.setdefault(user, [])
        elif line.startswith("topic ") and user is not None:
            _, access, topic = line.split(" ", 2)
            out[user].append((access, topic))
        elif line.startswith("pattern "):
            user = None
    return out


def _portable(grants: list[Grant]) -> list[Grant]:
    """The grants that exist on RabbitMQ and NATS ($SYS is Mosquitto's own)."""
    return [(a, t) for a, t in grants if not t.startswith("$SYS")]


def _reads(grants: list[Grant]) -> list[str]:
    return [t for a, t in _portable(grants) if a in ("read", "readwrite")]


def _writes(grants: list[Grant]) -> list[str]:
    return [t for a, t in _portable(grants) if a in ("write", "readwrite")]


# --- RabbitMQ ----------------------------------------------------------------------------------


def rabbit_key(mqtt_filter: str, *, player: bool = False) -> str:
    """A regular expression for the routing and binding keys of ``mqtt_filter``: ``/`` is ``.``,
    a ``+`` level is any one word (``*`` included, never ``#`` nor an empty word), ``%u`` is
    RabbitMQ's ``{username}`` (players)."""
    out = []
    for level in mqtt_filter.split("/"):
        if level == "+":
            out.append(r"[^.#]+")
        elif level == "#":
            raise ValueError(f"{mqtt_filter}: '#' has no RabbitMQ topic permission equivalent here")
        elif player and level == "%u":
            out.append("{username}")
        else:
            out.append(re.escape(level))
    return r"\.".join(out)


def rabbit_regex(filters: list[str], *, player: bool = False) -> str:
    """One anchored expression matching the keys of every filter, or :data:`NEVER`."""
    keys = list(dict.fromkeys(rabbit_key(f, player=player) for f in filters))
    if not keys:
        return NEVER
    return f"^{keys[0]}$" if len(keys) == 1 else "^(" + "|".join(keys) + ")$"


def rabbitmq_definitions(settings: Settings, *, vhost: str = "/", rig: bool = False,
                         password_hashes: dict[str, str] | None = None) -> dict[str, Any]:
    """The definitions (``rabbitmqctl import_definitions``) for every role user on ``vhost``:
    permissions and topic permissions, and the users themselves when ``password_hashes``
    (user -> RabbitMQ's rabbit_password_hashing_sha256 form) is given."""
    grants = role_grants(settings, rig=rig)
    out: dict[str, Any] = {"vhosts": [{"name": vhost}]}
    if password_hashes is not None:
        out["users"] = [{"name": u, "password_hash": password_hashes[u],
                         "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": []} for u in grants]
    out["permissions"] = [{"user": u, "vhost": vhost, "configure": QUEUES, "write": RESOURCES, "read": RESOURCES}
                          for u in grants]
    out["topic_permissions"] = [{"user": u, "vhost": vhost, "exchange": EXCHANGE, "write": rabbit_regex(_writes(g)),
                                 "read": rabbit_regex(_reads(g))} for u, g in grants.items()]
    return out


def rabbitmq_player_permissions(vhost: str = "/") -> dict[str, Any]:
    """What the player platform gives each player's user (``{username}`` is expanded by
    RabbitMQ): its own topic and retained state, nothing to publish."""
    return {"vhost": vhost, "configure": QUEUES, "write": RESOURCES, "read": RESOURCES,
            "topic": {"exchange": EXCHANGE, "write": NEVER, "read": rabbit_regex(list(PLAYER_FILTERS), player=True)}}


def render_rabbitmq(settings: Settings, *, vhost: str = "/", rig: bool = False,
                    password_hashes: dict[str, str] | None = None) -> str:
    """The definitions JSON; without ``password_hashes`` the users must exist already
    (``rabbitmqctl add_user``), or come from ``dealer deploy users --broker rabbitmq``."""
    doc = rabbitmq_definitions(settings, vhost=vhost, rig=rig, password_hashes=password_hashes)
    return json.dumps(doc, indent=2) + "\n"


# --- NATS --------------------------------------------------------------------------------------


def nats_subject(mqtt_filter: str) -> str:
    """The NATS subject of an MQTT filter (``/`` is ``.``, ``+`` is ``*``, ``#`` is ``>``)."""
    return ".".join("*" if lv == "+" else ">" if lv == "#" else lv for lv in mqtt_filter.split("/"))


def nats_password_variable(user: str) -> str:
    """The config variable that holds ``user``'s password (``dealer deploy users --broker nats``
    defines it in ``nats-passwords.conf``, included before the authorization block)."""
    return f"DEALER_PW_{user}"


def _nats_list(subjects: list[str]) -> str:
    return "[" + ", ".join(json.dumps(s) for s in subjects) + "]"


def nats_permissions(grants: list[Grant]) -> str:
    """One user's ``permissions`` map."""
    pubs = list(dict.fromkeys(nats_subject(t) for t in _writes(grants)))
    subs = list(dict.fromkeys(nats_subject(t) for t in _reads(grants)))
    pub = f"{{ allow: {_nats_list(pubs)} }}" if pubs else '{ deny: [">"] }'
    sub = f"{{ allow: {_nats_list(subs + ['$MQTT.sub.>'])} }}" if subs else '{ deny: [">"] }'
    return f"{{ publish: {pub}, subscribe: {sub} }}"


def nats_user(user: str, grants: list[Grant], password: str | None = None) -> str:
    """One entry of the ``users`` list: MQTT connections only; the password a literal (already a
    bcrypt hash) or, by default, the user's variable."""
    pw = json.dumps(password) if password is not None else f"${nats_password_variable(user)}"
    return (f"{{ user: {json.dumps(user)}, password: {pw}, allowed_connection_types: [\"MQTT\"], "
            f"permissions: {nats_permissions(grants)} }}")


def nats_player_user(player: str, password: str | None = None) -> str:
    """The entry the player platform adds for one player's user: its own topic and state, read only."""
    return nats_user(player, [("read", f.replace("%u", player)) for f in PLAYER_FILTERS], password)


def render_nats(settings: Settings, *, rig: bool = False, source: str | None = None) -> str:
    """The ``authorization`` block for nats.conf: every role user, its password a variable
    (:func:`nats_password_variable`), MQTT connections only."""
    grants = role_grants(settings, rig=rig)
    lines = [
        "# NATS authorization for the studio's MQTT protocol (docs/mqtt-topics.md, docs/brokers.md).",
        "# Rendered by `dealer deploy acl --broker nats --config FILE` from the same role table as the",
        "# Mosquitto ACL" + (f"; from: {source}" if source else "") + ". Each password is a variable that",
        "# `dealer deploy users --broker nats` defines in nats-passwords.conf (bcrypt hashes): include that",
        "# file before this block, then `nats-server --signal reload`.",
        "# A player's user (the player platform provisions one per player id) reads only its own topics:",
        f"#   {nats_player_user('PLAYER', '...')}",
        "authorization {",
        '  default_permissions: { publish: { deny: [">"] }, subscribe: { deny: [">"] } }',
        "  users = [",
    ]
    lines += [f"    {nats_user(user, g)}" for user, g in grants.items()]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


__all__ = ["NEVER", "PLAYER_FILTERS", "nats_password_variable", "nats_permissions", "nats_player_user", "nats_subject",
           "nats_user",
           "rabbit_key", "rabbit_regex", "rabbitmq_definitions", "rabbitmq_player_permissions", "render_nats",
           "render_rabbitmq", "role_grants"]
