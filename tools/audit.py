"""Game recall, disputes and journal audit for supervisors and regulators.

``dealer recall`` replays a table's journal through the same pure core that ran the game, so
what it shows is exactly what the backend decided: every read (with the reader's sequence
number and the receive time), every rescan and its reason, every prompt, bet, decision, void
reason and result, from the segment files rolled out of the journal (dealer/edge/segments.py)
on. A supervisor's table operation (open a round, pause, resume, close, reopen: signed, with the
supervisor's id and signature) is shown in the round that was in play, or last played, when it
was applied. Rounds are chosen by round id, time range and player (:class:`Selection`), from a
journal given by path or URL (``--journal``, read-only) or a configuration's; without a
configuration a table's rules come from the journal's own ``table_rules`` events.

``dealer recall --round ID --report`` prints the round's dispute report (:func:`dispute_report`,
:func:`render_report`), and ``dealer hand --round ID`` re-evaluates the round's hands with the
game's hand report under the rules it was played with (:func:`hand_for_round`).

``dealer audit verify`` walks the hash chain across every segment and the live journal, checks
each segment file against its record and every anchor, and reports the first row (and segment)
that does not hold.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from dealer.core.messages import RoundResult, RoundResultPart
from dealer.edge.config import ConfigError, Settings, load_settings
from dealer.edge.journal import JournalError, JournalWriteFailed
from dealer.edge.journals import audit_verify, is_url, open_read_only, target_of
from dealer.edge.segments import parse_anchor

# recall, render_recall, Selection, recall_journal, dispute_report, render_report: this module's
# public names still (the tests and ``tools/cli.py`` import them from here)
from tools.audit_recall import (
    RecallError,
    Replayed,
    Selection,
    parse_time,
    reading,
    recall,  # noqa: F401 (re-exported: the tests and tools/cli.py import it from here)
    recall_journal,
    render_recall,
    select_rounds,
)
from tools.audit_report import dispute_report, render_report


# --- the dispute report -------------------------------------------------------------------------


# --- dealer hand --round ------------------------------------------------------------------------


def hand_check(rep: Replayed, journal: Any | None = None) -> dict[str, Any]:
    """The recorded round's hands re-evaluated with the game's hand report (tools/games.py) under
    the rules it was played with, beside its result, and whether they agree (``agrees``: True,
    False, or None when no hand decided the round: a void, a cancellation, a pot won by folds).
    With ``journal``, the result still waiting in its outbox (as published) is compared too."""
    from tools.games import PlayedRound, kit

    res, rnd = rep.result, rep.round
    if res is None or rnd is None:
        raise RecallError(f"round {rep.record['round_id']} has no result in this journal (still in play): "
                          "there is nothing recorded to check")
    out: dict[str, Any] = {
        "round_id": res.round_id, "table_id": res.table_id, "game": res.game,
        "rules": {k: rep.record["rules"][k] for k in ("hash", "software_version", "source")},
        "options": json.loads(rep.rules.game.options.model_dump_json()),
        "recorded": json.loads(res.model_dump_json()),
    }
    if journal is not None:
        out["published"] = _published(journal, res)
    command = kit(res.game).hand
    if command is None or command.recorded is None:
        raise RecallError(f"no hand report of game {res.game} can re-evaluate a recorded round")
    if res.outcome != "COMPLETED":
        out.update(report=None, agrees=None, compared=[], differences=[],
                   note=f"the round was {res.outcome.lower()} ({res.reason}): no hand decided it, every bet refunded")
        return out
    seats = dict(rnd.seat_owner)
    check = command.recorded(PlayedRound(res, dict(rnd.cards), rep.rules.game.options, seats, rnd.hand))
    out.update(check)
    if out.get("published", {}).get("same") is False:
        out["agrees"] = False
        out["differences"] = [*out["differences"], "the result in the outbox (as published) differs from the replay"]
    return out


def _published(journal: Any, res: RoundResult) -> dict[str, Any]:
    """The round's result as it waits in the outbox (published, not yet acknowledged), joined
    from its parts, compared with the replay's. Once settlement acknowledged it, the outbox
    row is gone: ``in_outbox`` False."""
    from dealer.core.result_parts import join_parts

    key = res.idempotency_key
    rows = [r for r in journal.pending([res.table_id]) if r.key == key or r.key.startswith(key + "#")]
    if not rows:
        return {"in_outbox": False, "same": None}
    manifest = next((r for r in rows if r.key == key), None)
    if manifest is None:
        return {"in_outbox": True, "same": False}
    head = RoundResult.model_validate_json(manifest.payload)
    whole = join_parts(head, [RoundResultPart.model_validate_json(r.payload) for r in rows if r is not manifest])
    return {"in_outbox": True, "same": whole == res}


def hand_for_round(round_id: str, *, journal: str | Path | None = None,
                   config: str | Path | None = None) -> dict[str, Any]:
    """``dealer hand --round``: the round replayed from ``journal`` (a path or URL), else from the
    journal of ``config``, then :func:`hand_check`."""
    settings = load_settings(config) if config is not None else None
    target: str | Path = (journal if is_url(journal) else Path(journal)) if journal is not None \
        else target_of(settings)  # type: ignore[arg-type]  # without a journal the caller gives a config: target_of needs its settings
    configured = {t.id: t for t in settings.tables} if settings is not None else {}
    with reading(target) as j:
        picked = select_rounds(j, None, Selection(rounds=(round_id,)),
                               lambda t: configured[t].rules() if t in configured else None)
        return hand_check(picked[0], j)


# --- dealer recall ------------------------------------------------------------------------------


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(args.config)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _cmd_recall(args: argparse.Namespace) -> int:
    prog = "dealer recall"
    if not (args.config or args.journal):  # never a default path: say which journal to read
        print(f"{prog}: give --journal PATH_OR_URL (a journal file or a postgresql:// URL) or --config FILE",
              file=sys.stderr)
        return 2
    if args.report and not args.round_ids:
        print(f"{prog}: --report is one round's dispute report: give --round ROUND_ID", file=sys.stderr)
        return 2
    try:
        selection = Selection(rounds=tuple(args.round_ids or ()),
                              since=parse_time(args.since, "--since") if args.since is not None else None,
                              until=parse_time(args.until, "--until") if args.until is not None else None,
                              player=args.player, last=args.rounds)
        settings = _settings(args) if args.config else None
        if settings is not None and args.journal is None and args.table is not None \
                and all(t.id != args.table for t in settings.tables):
            raise ValueError(f"table {args.table!r} is not in this configuration ({[t.id for t in settings.tables]})")
        target: str | Path = ((args.journal if is_url(args.journal) else Path(args.journal)) if args.journal
                              else target_of(settings))  # type: ignore[arg-type]  # without a journal the caller gives a config: target_of needs its settings
        picked = recall_journal(target, args.table, selection, settings)
    except (ConfigError, ValueError) as exc:  # RecallError, JournalError (a missing journal), bad rules
        print(f"{prog}: {_one_line(exc)}", file=sys.stderr)
        return 2
    if args.report:
        reports = [dispute_report(r) for r in picked]
        if args.json:
            print(json.dumps(reports, indent=2, sort_keys=True, ensure_ascii=False))
        else:
            print("\f\n".join(render_report(r) for r in reports) if reports else "no round matches the selection")
        return 0
    rounds = [r.record for r in picked]
    if args.json:
        print(json.dumps(rounds, indent=2, sort_keys=True))
    else:
        print(render_recall(rounds) if rounds else "no round matches the selection")
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
                              else target_of(settings))  # type: ignore[arg-type]  # without a journal the caller gives a config: target_of needs its settings
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


def register(sub: argparse._SubParsersAction) -> None:
    from dealer.cli.args import CONFIG_HELP, int_range

    r = sub.add_parser("recall", help="rounds of a table with every event, replayed from the journal: the last ones, "
                       "or by round id, time range or player; --report prints a round's dispute report",
                       description="Replay rounds from a journal through the same pure core that ran them. Without a "
                       "selector: the table's last 10 rounds. Selectors (all must hold): --round (repeatable), "
                       "--since/--until (the round's open..result overlaps the range), --player. The journal is read, "
                       "never created or written: --journal PATH_OR_URL, or the journal of --config. Without --config "
                       "each round's rules come from the journal's table_rules events.")
    r.add_argument("table", metavar="TABLE", nargs="?",
                   help="the table id, e.g. TP1 (may be left out with --round: a round id names its table)")
    r.add_argument("--config", metavar="FILE",
                   help=CONFIG_HELP + "; its journal (journal_url, else journal_path) is read, never created or "
                   "written, and its tables' rules are used for rounds journaled before rules events")
    r.add_argument("--journal", metavar="PATH_OR_URL",
                   help="the journal to read: a SQLite file or a postgresql:// URL (read-only, never created; "
                        "instead of --config's journal)")
    r.add_argument("--round", dest="round_ids", action="append", metavar="ROUND_ID",
                   help="this round, e.g. TP1-7l6gbdyb-000042 (repeatable)")
    r.add_argument("--since", metavar="TIME",
                   help="rounds still running at or after TIME: ISO-8601 with Z or an offset, e.g. "
                        "2027-01-15T08:00:00Z or 2027-01-15T09:00:00+01:00")
    r.add_argument("--until", metavar="TIME", help="rounds opened at or before TIME (ISO-8601 with Z or an offset)")
    r.add_argument("--player", metavar="PLAYER_ID", help="rounds in which this player bet, decided or acted")
    r.add_argument("--rounds", type=int_range(1, 100_000), default=None, metavar="N",
                   help="the last N of the rounds selected (default: 10 without a selector, else all selected)")
    r.add_argument("--report", action="store_true",
                   help="print each --round's dispute report: plain text to print and sign (hole cards included, "
                        "marked private)")
    r.add_argument("--json", action="store_true", help="print the rounds (or the reports) as JSON")
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
