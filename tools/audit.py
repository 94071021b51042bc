"""Game recall and journal audit for supervisors and regulators.

``dealer recall TABLE`` replays the table's journal through the same pure core that ran
the game, so what it shows is exactly what the backend decided: every read (with the
reader's sequence number and the receive time), every rescan and its reason, every
prompt, bet, decision, void reason and result, from the segment files rolled out of the
journal (dealer/edge/segments.py) on. A supervisor's table operation (open a round, pause, resume,
close, reopen: signed, with the supervisor's id and signature) is shown in the round that was
in play, or last played, when it was applied. ``dealer audit verify`` walks the hash chain across every
segment and the live journal, checks each segment file against its record and every anchor,
and reports the first row (and segment) that does not hold.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dealer.edge.config import ConfigError, Settings, load_settings
from dealer.core.events import EVENT_ADAPTER
from dealer.edge.journal import JournalError, JournalWriteFailed
from dealer.edge.journals import audit_verify, is_url, open_read_only, target_of
from dealer.core.messages import PlayerMessage, RoundEvent, RoundResult, StationPrompt
from dealer.core.round import Rejection
from dealer.edge.segments import parse_anchor
from dealer.core.table import Table


def _iso(ms: int | None) -> str | None:
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _effect(e: Any) -> dict[str, Any]:
    if isinstance(e, RoundEvent):
        return {"event": e.event, **e.data}
    if isinstance(e, StationPrompt):
        return {"prompt": e.kind, "message": e.message}
    if isinstance(e, PlayerMessage):  # hole cards are shown to the auditor, marked private
        return {"private_to": e.player_id, "kind": e.kind, **e.data}
    if isinstance(e, RoundResult):
        return {"result": e.outcome, "idempotency_key": e.idempotency_key, "winner": e.winner,
                "reason": e.reason, "dealers": list(e.dealers)}
    if isinstance(e, Rejection):
        return {"rejected": e.reason}
    return {"effect": type(e).__name__}


def recall(settings: Settings, table_id: str, rounds: int = 10) -> list[dict[str, Any]]:
    """The last ``rounds`` rounds of a table, each with every journaled event and its effects.

    The table is rebuilt under the rules journaled for it (the last ``table_rules`` event before
    the first round shown, then every later one as it comes), exactly as the service replays it;
    only a journal older than rules events falls back to the configuration's rules. Each round
    names the rules it was played under: their hash, software version and canonical form."""
    cfg = next((t for t in settings.tables if t.id == table_id), None)
    if cfg is None:
        raise ValueError(f"table {table_id!r} is not in this configuration ({[t.id for t in settings.tables]})")
    journal = open_read_only(target_of(settings))  # never creates one (JournalError)
    try:
        opens = [r for r in journal.rows(table_id) if r.type == "open_round"]
        wanted = [r.round_id for r in opens[-rounds:]]
        if not opens:
            return []
        first = opens[-len(wanted)].id
        table = Table(cfg.rules(), series=journal.journal_id or None)
        rules_source = "configuration (no table_rules event journaled before this round)"
        before = journal.rules_before(table_id, first)
        if before is not None:
            table.handle(EVENT_ADAPTER.validate_json(before.body))
            rules_source = f"journal row {before.id}"
        out: dict[str, dict[str, Any]] = {}
        for row in journal.rows(table_id, since_id=first):
            ev = EVENT_ADAPTER.validate_json(row.body)
            if ev.type == "table_rules":
                rules_source = f"journal row {row.id}"
            step = table.handle(ev)
            rid = row.round_id or (table.current.round_id if table.current else None)
            if rid not in wanted:
                continue
            if rid not in out:
                played = table.current.rules if table.current is not None and table.current.round_id == rid \
                    else table.rules
                cur = table.current if table.current is not None and table.current.round_id == rid else None
                out[rid] = {"round_id": rid, "table_id": table_id, "game": played.game.name, "events": [],
                            "dealers": list(cur.dealers) if cur is not None else [],
                            "journal": {"id": journal.journal_id, "path": journal.path},
                            "rules": {"hash": played.rules_hash, "software_version": played.software_version,
                                      "source": rules_source, "canonical": json.loads(played.canonical)}}
            rec = out[rid]
            fields = {k: v for k, v in ev.model_dump(mode="json").items() if k not in ("type", "at")}
            rec["events"].append({
                "journal_id": row.id, "type": ev.type, "received_at": _iso(ev.at), "recorded_at": _iso(row.recorded_at),
                **fields, "effects": [_effect(e) for e in step.effects],
            })
            res = next((e for e in step.effects if isinstance(e, RoundResult)), None)
            if res is not None:
                rec["result"] = json.loads(res.model_dump_json())
        return [out[r] for r in wanted if r in out]
    finally:
        journal.close()


def render_recall(rounds: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    if rounds and rounds[0].get("journal"):  # the series in every round id and idempotency key
        lines.append(f"journal {rounds[0]['journal']['path']}  id {rounds[0]['journal']['id']}")
    for rnd in rounds:
        res = rnd.get("result") or {}
        lines.append(f"=== {rnd['round_id']} ({rnd['game']})  outcome: {res.get('outcome', 'in play')}"
                     + (f"  reason: {res['reason']}" if res.get("reason") else "")
                     + f"  dealt by: {', '.join(res.get('dealers') or rnd.get('dealers') or []) or '(nobody logged on)'}")
        rules = rnd.get("rules")
        if rules:
            lines.append(f"  rules {rules['hash']}  software {rules['software_version'] or '(unknown)'}  "
                         f"from {rules['source']}")
        for ev in rnd["events"]:
            detail = {k: v for k, v in ev.items()
                      if k not in ("journal_id", "type", "received_at", "recorded_at", "effects") and v is not None}
            effects = "; ".join(_short(e) for e in ev["effects"] if _short(e))
            lines.append(f"  #{ev['journal_id']:<6} {ev['received_at']}  {ev['type']:<17} "
                         f"{json.dumps(detail, sort_keys=True) if detail else ''}")
            if effects:
                lines.append(f"  {'':7} -> {effects}")
    return "\n".join(lines)


def _short(e: dict[str, Any]) -> str:
    if "prompt" in e:
        return str(e["message"]) if e["prompt"] in ("RESCAN", "ALERT", "DONE", "PAUSED", "CLOSED") else ""
    if "event" in e:
        if e["event"] == "card_registered":
            return f"card {e['position']}={e.get('card') or '(face down)'}"
        if e["event"] in ("round_result", "round_cancelled", "round_voided", "decision_made", "cards_revealed",
                          "dealer_logged_on",
                          "bet_accepted", "bet_rejected", "betting_closed", "rules_changed", "table_paused",
                          "table_resumed", "table_closing", "table_closed", "table_reopened", "betting_resumed",
                          "card_burned"):
            return e["event"] + " " + json.dumps({k: v for k, v in e.items() if k != "event"}, sort_keys=True)
        if e["event"] == "round_opened" and e.get("opened_by"):
            return e["event"] + " " + json.dumps({k: v for k, v in e.items() if k != "event"}, sort_keys=True)
        return ""
    if "private_to" in e:
        return f"(private to {e['private_to']}: {e['kind']} {e.get('position', '')}={e.get('card', '')})" \
            if e["kind"] == "hole_card" else ""
    if "rejected" in e:
        return f"REJECTED: {e['rejected']}"
    if "result" in e:
        return f"RESULT {e['result']} key={e['idempotency_key']}"
    return ""


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(args.config)


def _cmd_recall(args: argparse.Namespace) -> int:
    try:
        rounds = recall(_settings(args), args.table, args.rounds)
    except (ConfigError, ValueError) as exc:  # JournalError too: a missing journal is refused
        print(f"dealer recall: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as exc:  # damage that only reading the rows reaches
        print(f"dealer recall: the journal cannot be read: {exc}", file=sys.stderr)
        return 2
    except JournalWriteFailed as exc:  # the journal's database went away while reading
        print(f"dealer recall: the journal cannot be read: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(json.dumps(rounds, indent=2, sort_keys=True) if args.json else render_recall(rounds))
    return 0


def anchor_from_broker(settings: Settings, timeout: float = 10.0) -> tuple[int, str]:
    """The head the backend last published, retained, on ``studio/v1/backends/{node}/journal``,
    read with the configuration's broker and credentials (an auditor's own, e.g. the ops user).
    Raises ValueError when none arrives within ``timeout`` or it is malformed."""
    import asyncio
    import secrets

    from dealer.edge import topics
    from dealer.edge.runner import mqtt_password
    from drivers.mqtt import MqttBus

    m = settings.mqtt
    if m.url is None:
        raise ValueError("--anchor-from-broker needs [mqtt] url in the configuration")
    topic = topics.backend_journal(settings.service.node_id)

    async def read() -> bytes:
        got: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        bus = MqttBus(m.urls, client_id=f"audit-{secrets.token_hex(4)}", username=m.username,
                      password=mqtt_password(settings), accept_retained=True, ca_file=m.ca_file,
                      cert_file=m.cert_file, key_file=m.key_file)
        bus.subscribe(topic, lambda _t, p: got.done() or got.set_result(p))
        task = asyncio.create_task(bus.run())
        try:
            async with asyncio.timeout(timeout):
                return await got
        except TimeoutError:
            raise ValueError(f"no retained journal anchor on {topic} at {m.url} within {timeout:g} s") from None
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    payload = asyncio.run(read())
    try:
        return parse_anchor(str(json.loads(payload)["anchor"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"the journal anchor on {topic} is malformed: {exc}") from None


def _cmd_verify(args: argparse.Namespace) -> int:
    if not (args.config or args.journal):  # never a default path: say which journal to audit
        print("dealer audit verify: give --config FILE (its [service] journal_url or journal_path) or "
              "--journal PATH_OR_URL", file=sys.stderr)
        return 2
    try:
        settings = _settings(args) if args.config else None
    except ConfigError as exc:
        print(f"dealer audit verify: {exc}", file=sys.stderr)
        return 2
    try:
        target: str | Path = ((args.journal if is_url(args.journal) else Path(args.journal)) if args.journal
                              else target_of(settings))  # type: ignore[arg-type]
        # read-only: a missing journal is refused, never created
        journal = open_read_only(target)
    except JournalError as exc:  # missing, unreachable, not a journal, damaged, too old: one clear line
        print(f"dealer audit verify: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    path = journal.path  # a URL without its password
    journal_id = journal.journal_id
    try:
        anchors = [parse_anchor(a) for a in args.anchor or ()]
        if args.anchor_from_broker:
            if settings is None:
                raise ValueError("--anchor-from-broker needs --config (the broker and the node id)")
            anchors.append(anchor_from_broker(settings))
    except ValueError as exc:
        journal.close()
        print(f"dealer audit verify: {exc}", file=sys.stderr)
        return 2
    try:
        report = audit_verify(journal, anchors)
    except sqlite3.DatabaseError as exc:  # damage that only the walk reads
        print(f"dealer audit verify: journal {path} is damaged: {exc}", file=sys.stderr)
        return 2
    except JournalWriteFailed as exc:  # the journal's database went away during the walk
        print(f"dealer audit verify: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    finally:
        journal.close()
    print(json.dumps({"journal": str(path), "journal_id": journal_id, "rows": report.rows, "segments": report.segments,
                      "anchors": report.anchors, "ok": report.ok, "first_broken": report.first_broken,
                      "segment": report.segment, "reason": report.reason, "uncommitted": report.uncommitted},
                     sort_keys=True))
    return 0 if report.ok else 1


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from dealer.cli.args import CONFIG_HELP, int_range

    r = sub.add_parser("recall", help="the last rounds of a table with every event, replayed from the journal")
    r.add_argument("table", metavar="TABLE", help="the table id, e.g. TP1")
    r.add_argument("--config", required=True, metavar="FILE",
                   help=CONFIG_HELP + "; its journal (journal_url, else journal_path) is read, never created or "
                   "written")
    r.add_argument("--rounds", type=int_range(1, 100_000), default=10, metavar="N",
                   help="how many of the table's last rounds (default 10)")
    r.add_argument("--json", action="store_true", help="print the rounds as JSON")
    r.set_defaults(func=_cmd_recall)
    a = sub.add_parser("audit", help="journal audit")
    asub = a.add_subparsers(dest="audit", required=True)
    v = asub.add_parser("verify", help="check the journal's hash chain across its segments; exit 1 at the first "
                        "broken link, missing or altered segment, or anchor not matched")
    v.add_argument("--config", metavar="FILE",
                   help=CONFIG_HELP + "; the journal audited is its journal_url, else its journal_path")
    v.add_argument("--journal", metavar="PATH_OR_URL",
                   help="a journal file, or a postgresql:// URL (instead of --config's journal)")
    v.add_argument("--anchor", action="append", metavar="ROW_ID:HASH",
                   help="a head published on studio/v1/backends/{node}/journal (retained): the row must exist "
                        "with this hash, so rows cut off the end are found (repeatable)")
    v.add_argument("--anchor-from-broker", action="store_true",
                   help="also check the anchor retained on the broker of --config for its node_id")
    v.set_defaults(func=_cmd_verify)
