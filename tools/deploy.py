"""Deployment helpers behind ``dealer deploy``: the broker's users and ACL rendered from a config.

``dealer deploy acl --config FILE`` prints the Mosquitto ACL for the tables of FILE
(``deploy/mosquitto/acl`` is this output for ``deploy/tables/example.toml``); with
``--broker rabbitmq`` the same roles as a RabbitMQ definitions JSON (permissions and topic
permissions on ``amq.topic``), with ``--broker nats`` as a NATS ``authorization`` block
(tools/broker_acls.py).
``dealer deploy users --config FILE --out DIR`` provisions the broker in one step: a password
for every user the ACL names (tools/broker_users.py), Mosquitto's password file and the ACL
(or, with ``--broker``, RabbitMQ's definitions or NATS's passwords and authorization).
``dealer deploy check --config FILE`` prints the reasons ``dealer run`` would refuse to
start with FILE (``dealer.edge.preflight``), one per line, the journal against the anchor retained
on the broker included (or says it could not reach the broker).

The ACL is least privilege. Mosquitto's ``pattern`` lines substitute the WHOLE user name
(``%u``) or client id (``%c``), so a user named ``scanner-TP1`` cannot be mapped to the
topic segment ``TP1`` by a pattern; explicit per-table blocks are generated instead.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dealer.edge.config import Settings
from dealer.edge.roles import AUDITOR_USER, RIG_USER
from tools.mosquitto_acl import render_acl, scanner_user, station_user, supervisor_user, users_of


# --- CLI ------------------------------------------------------------------------------------


def _load(path: str) -> Settings | None:
    from dealer.edge.config import ConfigError, load_settings

    try:
        return load_settings(path)
    except ConfigError as exc:
        print(f"dealer: {exc}", file=sys.stderr)
        return None


def _cmd_acl(args: argparse.Namespace) -> int:
    from tools.broker_acls import render_nats, render_rabbitmq

    settings = _load(args.config)
    if settings is None:
        return 2
    if args.vhost is not None and args.broker != "rabbitmq":
        print("dealer deploy acl: --vhost is for --broker rabbitmq", file=sys.stderr)
        return 2
    if args.broker == "rabbitmq":
        sys.stdout.write(render_rabbitmq(settings, vhost=args.vhost or "/", rig=args.rig))
    elif args.broker == "nats":
        sys.stdout.write(render_nats(settings, rig=args.rig, source=args.source))
    else:
        sys.stdout.write(render_acl(settings, source=args.source, rig=args.rig))
    return 0


def _cmd_users(args: argparse.Namespace) -> int:
    from tools.broker_users import ProvisionError, provision

    settings = _load(args.config)
    if settings is None:
        return 2
    if args.vhost is not None and args.broker != "rabbitmq":
        print("dealer deploy users: --vhost is for --broker rabbitmq", file=sys.stderr)
        return 2
    try:
        report = provision(settings, args.out, rig=args.rig, rotate=args.rotate, source=args.config,
                           broker=args.broker, vhost=args.vhost or "/")
    except ProvisionError as exc:
        print(f"dealer deploy users: {exc}", file=sys.stderr)
        return 2
    print(report)
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    """The lines ``dealer run`` would print refusing to start (dealer/edge/preflight.py), exit 2;
    or ``FILE: ok``."""
    from dealer.edge.preflight import start_refusals
    from dealer.edge.security import refusal_message

    settings = _load(args.config)
    if settings is None:
        return 2
    problems, not_compared = start_refusals(settings, args.config), None
    if not problems:  # then, as `dealer run` does, the journal against the anchor on the broker
        from dealer.edge.preflight import broker_refusals

        problems, not_compared = broker_refusals(settings)
    if problems:
        print(refusal_message(problems), file=sys.stderr)
        return 2
    print(f"{args.config}: ok" + (f" (the journal was not compared with the anchor on the broker: {not_compared})"
                                  if not_compared else ""))
    return 0


def _broker_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker", choices=["mosquitto", "rabbitmq", "nats"], default="mosquitto",
                   help="the broker to render for (default mosquitto; docs/brokers.md, 'Roles on RabbitMQ and NATS')")
    p.add_argument("--vhost", metavar="NAME", help="RabbitMQ: the virtual host the MQTT plugin uses (mqtt.vhost; "
                   "default /)")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``dealer deploy acl|check`` to the ``dealer`` command's subparsers."""
    from dealer.cli.args import CONFIG_HELP

    d = subparsers.add_parser("deploy", help="deployment helpers: the broker's users, passwords and ACL for a config, "
                              "pre-flight checks")
    dsub = d.add_subparsers(dest="deploy", required=True)
    acl = dsub.add_parser("acl", help="print the broker's permissions for the tables of a config: Mosquitto's ACL, "
                          "or the same roles for RabbitMQ (definitions JSON) or NATS (authorization block)")
    acl.add_argument("--config", required=True, metavar="FILE", help=CONFIG_HELP)
    _broker_options(acl)
    acl.add_argument("--source", metavar="NAME", help="name the config in the ACL's header comment (default: none)")
    acl.add_argument("--rig", action="store_true", help="also the simulation rig's user (dealer simulate, docs/rig.md): "
                     "for a test bench's broker, never a studio's")
    acl.set_defaults(func=_cmd_acl)
    us = dsub.add_parser("users", help="provision the broker in one step: a password for every role's user (kept "
                         "when it exists), Mosquitto's password file and the ACL, in one directory")
    us.add_argument("--config", required=True, metavar="FILE", help=CONFIG_HELP)
    us.add_argument("--out", required=True, metavar="DIR",
                    help="the directory to write: passwd and acl for Mosquitto (password_file, acl_file), "
                         "definitions.json for RabbitMQ, nats-passwords.conf and nats-authorization.conf for NATS; "
                         "and secrets/USER.pw (mode 0600) for each role's client (--password-file, mqtt.password_file)")
    _broker_options(us)
    us.add_argument("--rig", action="store_true", help="also the simulation rig's user (a test bench's broker only)")
    us.add_argument("--rotate", action="store_true", help="give every user a new password (default: keep the ones "
                    "in DIR/secrets, make the missing ones)")
    us.set_defaults(func=_cmd_users)
    chk = dsub.add_parser("check", help="print why `dealer run` would refuse to start with a config (exit 2), "
                                        "or 'ok'")
    chk.add_argument("--config", required=True, metavar="FILE", help=CONFIG_HELP)
    chk.set_defaults(func=_cmd_check)
    return d


__all__ = ["AUDITOR_USER", "RIG_USER", "render_acl", "register", "scanner_user", "station_user", "supervisor_user",
           "users_of"]
