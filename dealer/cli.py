"""The ``dealer`` command: demo, run, hand, rtp, schemas, bench, outbox, ..."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path


def _cmd_demo(args: argparse.Namespace) -> int:
    from dealer.demo import run_demo
    from dealer.logs import configure_logging

    configure_logging(args.log_level)
    summary = asyncio.run(run_demo(rounds=args.rounds, seed=args.seed, broker=args.broker, faults=not args.no_faults,
                                   betting_seconds=args.betting_seconds, game=args.game))
    ok = summary["rounds_settled"] >= args.rounds and not summary["reconciliation_mismatches"]
    return 0 if ok else 1


def _cmd_run(args: argparse.Namespace) -> int:
    from dealer.config import ConfigError, load_settings
    from dealer.logs import configure_logging
    from dealer.runner import run_loop, run_service

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"dealer: {exc}", file=sys.stderr)
        return 2
    from dealer.security import check_deployment, refusal_message

    problems = check_deployment(settings, args.config)
    if problems:  # refuse an unsafe deployment before touching the network
        print(refusal_message(problems), file=sys.stderr)
        return 2
    configure_logging(settings.service.log_level)
    from dealer.journal import JournalDiskFull, JournalError
    from dealer.runner import RetryableStartError

    # Exit status: 2 = refused, a person must act (systemd's RestartPreventExitStatus=2);
    # 1 = may pass by itself, restarted with backoff. One line on stderr, no traceback.
    try:
        run_loop(run_service(settings))
    except KeyboardInterrupt:
        pass
    except JournalError as exc:  # locked by another process, missing directory, corrupt, too old
        print(f"dealer: refusing to start: {_one_line(exc)}", file=sys.stderr)
        return 2
    except ValueError as exc:  # e.g. an unreadable or malformed scanner key file
        print(f"dealer: cannot start: {exc}", file=sys.stderr)
        return 2
    except (RetryableStartError, JournalDiskFull) as exc:  # the metrics port still in use, a full disk
        print(f"dealer: cannot start (will be retried): {_one_line(exc)}", file=sys.stderr)
        return 1
    return 0


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _cmd_hand(args: argparse.Namespace) -> int:
    """Evaluate hands for a dispute: Teen Patti (A vs B), Sevenluck (player vs dealer),
    Seven-Card Stud (5-7 cards each, one or more --vs hands) or Seotda (2 cards each, S1 then
    one --vs per further seat, one pot)."""
    from dealer.cards import CardError
    from dealer.games import seotda_rank, sevenluck, stud_eval, teen_patti

    reports = {
        "teen-patti": (teen_patti.TeenPattiOptions, teen_patti.hand_report),
        "sevenluck": (sevenluck.SevenluckOptions, sevenluck.hand_report),
        "stud": (None, stud_eval.hand_report),
        "seotda": (seotda_rank.RankRules, seotda_rank.hand_report),
    }
    if args.game not in reports:
        print(f"dealer hand: no hand report for game {args.game!r} (known: {', '.join(reports)})", file=sys.stderr)
        return 2
    options_model, hand_report = reports[args.game]
    try:
        if args.game == "seotda":  # house options map to RankRules fields (seotda.md §5.2, §9)
            report = seotda_rank.hand_report(args.cards, args.vs, seotda_rank.RankRules.from_options(args.option))
        elif options_model is None:
            if args.option:
                raise ValueError(f"{args.game} takes no --option")
            report = hand_report(args.cards, args.vs)  # type: ignore[operator]
        else:
            if len(args.vs) != 1:
                raise ValueError(f"{args.game} compares two hands: give exactly one --vs, got {len(args.vs)}")
            bad = [kv for kv in args.option if "=" not in kv]
            if bad:
                raise ValueError(f"--option takes key=value, got {bad[0]!r}")
            options = options_model.model_validate(dict(kv.split("=", 1) for kv in args.option))
            report = hand_report(args.cards, args.vs[0], options)  # type: ignore[operator]
    except (CardError, ValueError) as exc:
        print(f"dealer hand: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2, ensure_ascii=False))  # hand names are Unicode (9·4, ♠)
    return 0


def _option_overrides(pairs: list[str]) -> list[tuple[list[str], object]]:
    """``key=value`` (``pay_table.category=value`` for one pay-table entry; a JSON object
    value replaces a whole pay table) -> (key path, value)."""
    out: list[tuple[list[str], object]] = []
    for kv in pairs:
        if "=" not in kv:
            raise ValueError(f"--option {kv!r}: expected key=value, e.g. tie_ratio=40 or pair_plus.flush=4")
        key, value = kv.split("=", 1)
        path = key.strip().split(".")
        if not all(path) or len(path) > 2:
            raise ValueError(f"--option {kv!r}: the key must be NAME or PAY_TABLE.CATEGORY")
        parsed: object = value
        if value.lstrip().startswith("{"):
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"--option {kv!r}: bad JSON object: {exc}") from None
        out.append((path, parsed))
    return out


def _validation_message(exc: Exception) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(x) for x in e['loc']) or 'options'}: {e['msg']}" for e in exc.errors())
    return str(exc)


def _rtp_options(args: argparse.Namespace):
    """The game's validated options: the config table's (if any), then the --option overrides."""
    from dealer.config import load_settings
    from dealer.games import game_class

    base: dict = {}
    if args.config or args.table:
        if not (args.config and args.table):
            raise ValueError("--config and --table go together")
        settings = load_settings(args.config)
        table = next((t for t in settings.tables if t.id == args.table), None)
        if table is None:
            raise ValueError(f"no table {args.table!r} in {args.config} "
                             f"(tables: {', '.join(t.id for t in settings.tables) or 'none'})")
        if table.game != args.game:
            raise ValueError(f"table {args.table} plays {table.game}, not {args.game}")
        base = dict(table.options)
    options_cls = game_class(args.game).Options
    current = options_cls.model_validate(base).model_dump()
    for path, value in _option_overrides(args.option):
        if len(path) == 1:
            current[path[0]] = value
            continue
        table_name, category = path
        if not isinstance(current.get(table_name), dict):
            raise ValueError(f"--option {'.'.join(path)}: {table_name!r} is not a pay table of {args.game}")
        current[table_name] = {**current[table_name], category: value}
    return options_cls.model_validate(current)


class _TqdmProgress:
    """The rtp module's ``progress(stage, done, total)`` callback as tqdm bars on stderr."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bars: dict = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = tqdm(total=total, desc=stage, unit="hand" if total > 1 else "step",
                                          file=sys.stderr, leave=False)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def _percent_arg(value: str, what: str):
    from decimal import Decimal, InvalidOperation
    from fractions import Fraction

    if value.lower() == "none":
        return None
    try:
        d = Decimal(value)
    except InvalidOperation:
        raise ValueError(f"{what} {value!r}: expected a percentage such as 97.5 (or none)") from None
    if not d.is_finite():
        raise ValueError(f"{what} {value!r}: expected a finite percentage")
    return Fraction(d)


def _cmd_rtp(args: argparse.Namespace) -> int:
    from dealer import rtp

    if args.game not in rtp.RTP_GAMES:
        print(f"dealer rtp: no RTP report for game {args.game!r} (known: {', '.join(rtp.RTP_GAMES)})",
              file=sys.stderr)
        return 2
    try:
        options = _rtp_options(args)
        min_rtp = _percent_arg(args.min_rtp, "--min-rtp") if args.min_rtp is not None else rtp.DEFAULT_MIN_RTP
        max_rtp = (_percent_arg(args.max_rtp, "--max-rtp") if args.max_rtp is not None
                   else rtp.DEFAULT_MAX_RTP[args.game])
    except ValueError as exc:  # includes pydantic's ValidationError and ConfigError
        print(f"dealer rtp: {_validation_message(exc)}", file=sys.stderr)
        return 2
    progress = _TqdmProgress(enabled=not args.quiet and sys.stderr.isatty())
    try:
        report = rtp.game_report(args.game, options, progress)
    finally:
        progress.close()
    report.apply_limits(min_rtp, max_rtp)
    if args.json:
        print(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        print(report.render())
    return 1 if args.strict and report.flagged else 0


def _cmd_bench_rtp(args: argparse.Namespace) -> int:
    from dealer.rtp import run_rtp_bench

    print(json.dumps(run_rtp_bench(), sort_keys=True))
    return 0


def _cmd_schemas(args: argparse.Namespace) -> int:
    from dealer.schemas import check_schemas, write_schemas

    if args.check:
        stale = check_schemas(Path(args.out))
        for name in stale:
            print(f"stale or missing schema: {name}", file=sys.stderr)
        return 1 if stale else 0
    for path in write_schemas(Path(args.out)):
        print(path)
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from dealer.bench import run_latency_bench
    from dealer.logs import configure_logging
    from dealer.runner import run_loop

    configure_logging("warning")
    result = run_loop(run_latency_bench(tables=args.tables, seconds=args.seconds, broker=args.broker,
                                        fsync=not args.no_fsync, loop=args.loop), args.loop)
    print(json.dumps(result, sort_keys=True))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dealer", description="Live-dealer table backend")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="self-contained demo: simulated shoe on a PTY, SQLite in a temp folder")
    d.add_argument("--game", choices=["teen-patti", "sevenluck", "stud", "seotda", "matgo"],
                   default="teen-patti")
    d.add_argument("--rounds", type=int, default=4)
    d.add_argument("--seed", type=int, default=7)
    d.add_argument("--broker", help="also publish over MQTT, e.g. mqtt://127.0.0.1:1883")
    d.add_argument("--no-faults", action="store_true", help="no injected scanner faults")
    d.add_argument("--betting-seconds", type=float, default=0.8)
    d.add_argument("--log-level", default="error", choices=["debug", "info", "warning", "error"])
    d.set_defaults(func=_cmd_demo)

    r = sub.add_parser("run", help="run the backend for the tables in a TOML config (env DEALER_* overrides)")
    r.add_argument("--config", required=True)
    r.set_defaults(func=_cmd_run)

    h = sub.add_parser("hand", help="evaluate hands for a dispute: hand teen-patti AS KD QC --vs 2H 3H 4H, "
                       "hand sevenluck PLAYER-CARDS --vs DEALER-CARDS, hand stud 7CARDS --vs 7CARDS [--vs ...], "
                       "hand seotda 03G 08G --vs 04A 07A [--vs ...]")
    h.add_argument("game", help="teen-patti, sevenluck, stud or seotda")
    h.add_argument("cards", nargs="+", help="3 cards (teen-patti, sevenluck), 5-7 cards (stud) or 2 cards (seotda)")
    h.add_argument("--vs", nargs="+", action="append", required=True,
                   help="the other hand; repeatable for stud and seotda (one opponent hand each)")
    h.add_argument("--option", action="append", default=[], help="house option key=value, e.g. six_card_wheel=NOT_ALLOWED or rematch_94_mode=ALWAYS")
    h.set_defaults(func=_cmd_hand)

    q = sub.add_parser("rtp", help="exact RTP and house edge of every bet type of a pay table, e.g. rtp teen-patti")
    q.add_argument("game", help="teen-patti or sevenluck")
    q.add_argument("--option", action="append", default=[],
                   help="house option or pay-table entry key=value, e.g. tie_ratio=40, pair_plus.flush=4 (repeatable)")
    q.add_argument("--config", help="TOML config file: start from the options of the table given with --table")
    q.add_argument("--table", help="table id in --config")
    q.add_argument("--json", action="store_true", help="print the report as JSON")
    q.add_argument("--min-rtp", metavar="PCT", help="flag bets whose RTP is below PCT percent (default 90.0)")
    q.add_argument("--max-rtp", metavar="PCT",
                   help="flag bets whose RTP is above PCT percent (default: 97.50 for teen-patti, none for sevenluck)")
    q.add_argument("--strict", action="store_true", help="exit 1 when any bet is flagged")
    q.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    q.set_defaults(func=_cmd_rtp)

    s = sub.add_parser("schemas", help="write (or --check) the JSON Schemas of the wire messages")
    s.add_argument("--out", default="docs/schemas")
    s.add_argument("--check", action="store_true")
    s.set_defaults(func=_cmd_schemas)

    b = sub.add_parser("bench", help="benchmarks (figures as JSON)")
    bsub = b.add_subparsers(dest="bench", required=True)
    lat = bsub.add_parser("latency", help="N tables through a real Mosquitto, one card per second each")
    lat.add_argument("--tables", type=int, default=1)
    lat.add_argument("--seconds", type=float, default=20.0)
    lat.add_argument("--broker", help="use this broker instead of starting a private mosquitto")
    lat.add_argument("--no-fsync", action="store_true")
    lat.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop",
                     help="event loop of the backend and the load generator")
    lat.set_defaults(func=_cmd_bench)
    rb = bsub.add_parser("rtp", help="wall time of each game's full exact RTP report")
    rb.set_defaults(func=_cmd_bench_rtp)
    from dealer import fuzz

    fuzz.register(bsub)
    from dealer import audit, deploy_tools, outbox_cli, supervisor_cli

    audit.register(sub)
    deploy_tools.register(sub)
    outbox_cli.register(sub)
    supervisor_cli.register(sub)
    from simulators import soak

    soak.register(sub)
    from dealer import settle_cli, station_cli
    from simulators import simulate

    settle_cli.register(sub)  # the reference settlement consumer, as a service
    station_cli.register(sub)  # a terminal dealer station
    simulate.register(sub)  # virtual shoes, dealers and players for `dealer run` tables
    from dealer import matgo_arena

    matgo_arena.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from dealer.logs import configure_logging

    configure_logging("warning")  # every command logs JSON lines on stderr; some set their own level
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
