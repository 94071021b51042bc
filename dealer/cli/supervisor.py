"""``dealer supervisor``: a supervisor's signing tool (docs/mqtt-topics.md §10).

``dealer supervisor void TABLE ROUND --reason TEXT --supervisor ID --key-file FILE --broker URL``
builds a ``supervisor_void`` command issued now, signs it with the supervisor's own key
(``dealer.edge.signing``), publishes it at QoS 1 on ``studio/v1/tables/TABLE/supervisor``,
waits for the broker's PUBACK and prints the published JSON. The table operations
(``open-round``, ``pause``, ``resume``, ``close``, ``reopen TABLE [--reason TEXT]`` with the
same options, §10.7) do the same for ``supervisor_open_round`` ... ``supervisor_reopen``.
``dealer supervisor keygen --out FILE`` writes a fresh key (mode 0600) for
``[[security.supervisors]] key_files``.

Bad input (a key file, a broker URL, an id, an unreachable broker) is one line on stderr
and exit status 2; nothing is published. Exit 0 means the broker acknowledged the
message, not that the backend accepted it: its answer is on the table's ``events``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import ssl
import stat
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from dealer.edge import topics
from dealer.cli.client_options import BadInput, add_broker_options, credentials

_CLI_NAMES = {"table_id": "TABLE", "round_id": "ROUND", "supervisor": "--supervisor",
              "command_id": "--command-id", "reason": "--reason"}

#: ``dealer supervisor NAME`` -> (command type, command id prefix, help) of each table operation.
TABLE_OPERATIONS: dict[str, tuple[str, str, str]] = {
    "open-round": ("supervisor_open_round", "open", "open the table's next round now (how a table with "
                   "auto_rounds = false plays)"),
    "pause": ("supervisor_pause", "pause", "pause the table: no new round; the round in play stands still, its "
              "timers stopped; the station shows PAUSED"),
    "resume": ("supervisor_resume", "resume", "resume a paused table: every pending decision, turn or betting "
               "period gets its full window again"),
    "close": ("supervisor_close", "close", "close the table: no new round until it is reopened (a round in play "
              "is played to its end first)"),
    "reopen": ("supervisor_reopen", "reopen", "reopen a closed table (or cancel a close whose last round is "
               "still in play)"),
}


class _Bad(Exception):
    """Bad input: the message is the one line printed on stderr."""


def supervisor_topic(table_id: str) -> str:
    return topics.table_topic(table_id, "supervisor")


def _signing_key(path: str) -> bytes:
    from dealer.edge.keys import read_hex_key

    key = read_hex_key(Path(path), "--key-file")
    mode = stat.S_IMODE(Path(path).stat().st_mode)
    if mode & 0o077:  # like ssh: a signing key others can read is no longer this supervisor's alone
        raise _Bad(f"--key-file {path} is accessible by group or others (mode {mode:04o}): "
                   f"it must be private to you (chmod 600 {path})")
    return key


def build_void(key: bytes, *, table_id: str, round_id: str, reason: str, supervisor: str, command_id: str,
               issued_at: int) -> dict[str, Any]:
    """The signed ``supervisor_void`` envelope; _Bad naming the option for an invalid field."""
    return build_command(key, "supervisor_void", table_id=table_id, round_id=round_id, reason=reason,
                         supervisor=supervisor, command_id=command_id, issued_at=issued_at)


def build_command(key: bytes, command_type: str, *, table_id: str, supervisor: str, command_id: str, issued_at: int,
                  round_id: str | None = None, reason: str | None = None) -> dict[str, Any]:
    """The signed envelope of ``command_type`` (a table operation names no round; its reason is
    optional and left out when not given); _Bad naming the option for an invalid field."""
    from pydantic import ValidationError

    from dealer.edge.signing import COMMAND_TYPES, sign_command

    command: dict[str, Any] = {"type": command_type, "command_id": command_id, "supervisor": supervisor,
                               "table_id": table_id}
    if round_id is not None:
        command["round_id"] = round_id
    command["issued_at"] = issued_at
    if reason is not None:
        command["reason"] = reason
    signed = sign_command(key, command)
    try:
        COMMAND_TYPES[command_type].model_validate(signed)
    except ValidationError as exc:
        raise _Bad("; ".join(f"{_CLI_NAMES.get(str(e['loc'][0]), e['loc'][0]) if e['loc'] else 'command'}: {e['msg']}"
                             for e in exc.errors(include_url=False, include_input=False))) from None
    return signed


async def publish_once(host: str, port: int, topic: str, payload: bytes, *, username: str | None,
                       password: str | None, tls_context: ssl.SSLContext | None, client_id: str,
                       timeout: float) -> None:
    """Connect, publish at QoS 1, return after the PUBACK; TimeoutError after ``timeout``."""
    import aiomqtt

    inner = timeout + 5  # aiomqtt's own timeouts never fire first: one deadline, one message
    async with asyncio.timeout(timeout):
        async with aiomqtt.Client(host, port, username=username, password=password, identifier=client_id,
                                  tls_context=tls_context, timeout=inner, keepalive=max(5, int(inner)),
                                  clean_session=True) as client:
            await client.publish(topic, payload, qos=1, retain=False, timeout=inner)


def _cmd_void(args: argparse.Namespace) -> int:
    return _sign_and_publish(args, "void", lambda key: build_void(
        key, table_id=args.table, round_id=args.round, reason=args.reason, supervisor=args.supervisor,
        command_id=args.command_id or f"void-{uuid.uuid4().hex}", issued_at=time.time_ns() // 1_000_000))


def _cmd_table(args: argparse.Namespace) -> int:
    command_type, prefix, _ = TABLE_OPERATIONS[args.supervisor_command]
    return _sign_and_publish(args, args.supervisor_command, lambda key: build_command(
        key, command_type, table_id=args.table, reason=args.reason, supervisor=args.supervisor,
        command_id=args.command_id or f"{prefix}-{uuid.uuid4().hex}", issued_at=time.time_ns() // 1_000_000))


def _sign_and_publish(args: argparse.Namespace, name: str, build: Any) -> int:
    """Check the options, build and sign the command with the key file, publish it at QoS 1 and
    wait for the PUBACK: exit 0 and the JSON printed, or one line on stderr and exit 2."""
    import aiomqtt

    from drivers.mqtt import parse_broker_url

    try:
        if not (0 < args.timeout <= 600):
            raise _Bad(f"--timeout {args.timeout}: give 0 < seconds <= 600")
        try:
            host, port, tls = parse_broker_url(args.broker)
        except ValueError as exc:
            raise _Bad(f"--broker: {exc}") from None
        key = _signing_key(args.key_file)
        command = build(key)
        try:
            password, tls_context = credentials(args, args.broker, tls)
        except BadInput as exc:
            raise _Bad(str(exc)) from None
        payload = json.dumps(command, ensure_ascii=False, separators=(",", ":"))
        try:
            asyncio.run(publish_once(host, port, supervisor_topic(args.table), payload.encode("utf-8"),
                                     username=args.username, password=password, tls_context=tls_context,
                                     client_id=f"supervisor-{uuid.uuid4().hex[:12]}", timeout=args.timeout))
        except TimeoutError:
            raise _Bad(f"broker {args.broker} did not acknowledge within {args.timeout:g} s (is it reachable?): "
                       "the command is not confirmed") from None
        except aiomqtt.MqttError as exc:
            raise _Bad(f"cannot publish to {args.broker}: {exc or type(exc).__name__}") from None
        except (OSError, ssl.SSLError) as exc:
            raise _Bad(f"cannot publish to {args.broker}: {getattr(exc, 'strerror', None) or exc}") from None
    except (_Bad, ValueError) as exc:  # ValueError: the key file (dealer.edge.keys names it)
        print(f"dealer supervisor {name}: {exc}", file=sys.stderr)
        return 2
    print(payload)
    return 0


def _cmd_keygen(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        print(f"dealer supervisor keygen: {out} already exists: refusing to overwrite a key", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"dealer supervisor keygen: cannot create {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    with os.fdopen(fd, "w", encoding="ascii") as f:
        os.fchmod(f.fileno(), 0o600)  # whatever the umask
        f.write(secrets.token_hex(32) + "\n")
    print(out)
    return 0


def _common_options(v: argparse.ArgumentParser, prefix: str) -> None:
    """The options every signed command shares (void and the table operations)."""
    v.add_argument("--supervisor", required=True, metavar="ID",
                   help="your supervisor id, as in the backend's [[security.supervisors]]")
    v.add_argument("--key-file", required=True, metavar="FILE",
                   help="your signing key (hex; mode 0600, see `dealer supervisor keygen`)")
    add_broker_options(v, connect_timeout=False)  # the same broker, credential and TLS options as every client
    v.add_argument("--command-id", metavar="ID",
                   help=f"the command id (default: a fresh {prefix}-<uuid4>); it must be new: the backend refuses an "
                        "id reused with other content, and every run of this tool issues new content")
    v.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="give up when the broker has not acknowledged within SECONDS (default 10)")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``dealer supervisor void|open-round|pause|resume|close|reopen|keygen`` to the
    ``dealer`` command's subparsers."""
    s = subparsers.add_parser("supervisor", help="a supervisor's signing tool: publish a signed void or table "
                              "operation (open a round, pause, resume, close, reopen), make a key")
    ssub = s.add_subparsers(dest="supervisor_command", required=True)
    v = ssub.add_parser("void", help="sign and publish a supervisor_void for one round (docs/mqtt-topics.md §10)")
    v.add_argument("table", metavar="TABLE", help="the table id, e.g. TP1")
    v.add_argument("round", metavar="ROUND", help="the round id to void, e.g. TP1-000044")
    v.add_argument("--reason", required=True, help="why the round is voided (1 to 200 characters), journaled")
    _common_options(v, "void")
    v.set_defaults(func=_cmd_void)
    for name, (command_type, prefix, text) in TABLE_OPERATIONS.items():
        t = ssub.add_parser(name, help=f"{text} (signed {command_type}, docs/mqtt-topics.md §10.7)")
        t.add_argument("table", metavar="TABLE", help="the table id, e.g. TP1")
        t.add_argument("--reason", help="why (optional, 1 to 200 characters): journaled and shown on the station")
        _common_options(t, prefix)
        t.set_defaults(func=_cmd_table)
    k = ssub.add_parser("keygen", help="write a fresh random 32-byte signing key (hex, mode 0600) to a new file")
    k.add_argument("--out", required=True, metavar="FILE", help="the key file to create (never overwritten)")
    k.set_defaults(func=_cmd_keygen)
    return s


__all__ = ["TABLE_OPERATIONS", "build_command", "build_void", "publish_once", "register", "supervisor_topic"]
