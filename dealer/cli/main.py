"""The ``dealer`` command. Production commands live here (``run``, ``outbox``, ``supervisor``);
the tools (``demo``, ``hand``, ``rtp``, ``bench``, ``soak``, ...) add theirs from ``tools.cli``."""

from __future__ import annotations

import argparse
import sys

from dealer.cli.args import CONFIG_HELP, DealerArgumentParser


def _cmd_run(args: argparse.Namespace) -> int:
    from dealer.edge.config import ConfigError, load_settings
    from dealer.edge.logs import configure_logging
    from dealer.edge.runner import run_loop, run_service

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"dealer: {exc}", file=sys.stderr)
        return 2
    from dealer.edge.preflight import start_refusals
    from dealer.edge.rtp_policy import table_reports
    from dealer.edge.security import refusal_message

    rtp_reports = table_reports(settings)  # exact, before any table opens (dealer/edge/rtp_policy.py)
    problems = start_refusals(settings, args.config, rtp_reports)  # what `dealer deploy check` prints
    if problems:  # refuse before touching the network
        print(refusal_message(problems), file=sys.stderr)
        return 2
    configure_logging(settings.service.log_level)
    from dealer.edge.journal import JournalDiskFull, JournalError
    from dealer.edge.runner import RetryableStartError

    # Exit status: 2 = refused, a person must act (systemd's RestartPreventExitStatus=2);
    # 1 = may pass by itself, restarted with backoff. One line on stderr, no traceback.
    try:
        run_loop(run_service(settings, rtp_reports, args.config))
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

def build_parser() -> argparse.ArgumentParser:
    from dealer.core.rules import software_version

    p = DealerArgumentParser(prog="dealer", description="Live-dealer table backend")
    p.add_argument("--version", action="version",  # the version each round's rules record (software_version)
                   version=f"dealer {software_version()} (Python {sys.version.split()[0]})")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("run", help="run the backend for the tables in a TOML config (env DEALER_* overrides)",
                       description="Run the table backend for the tables of a TOML config: read the scanners, apply "
                       "each game's rules, journal every input before its effects, publish prompts, events and "
                       "results over MQTT and keep each result in the outbox until settlement acknowledges it. "
                       "Refuses to start (exit 2, one line per reason; `dealer deploy check` prints the same) on an "
                       "unsafe or unusable configuration; exit 1 is a failure that may pass by itself (restarted "
                       "with backoff). SIGHUP reloads keys and table settings that no round in play depends on; "
                       "SIGTERM stops after the batch in flight. See docs/operations.md.")
    r.add_argument("--config", required=True, metavar="FILE", help=CONFIG_HELP)
    r.set_defaults(func=_cmd_run)

    from dealer.cli import cluster as cluster_cli, outbox as outbox_cli, supervisor as supervisor_cli, web as web_cli

    cluster_cli.register(sub)
    outbox_cli.register(sub)
    supervisor_cli.register(sub)
    web_cli.register(sub)
    _register_tools(sub)
    return p


#: The module that adds the tool subcommands (demo, bench, rtp, ...), loaded by name: the
#: runtime never imports the tools (tests/test_layout.py). A production install without them
#: keeps the production commands.
TOOLS_MODULE = "tools.cli"


def _register_tools(sub: argparse._SubParsersAction) -> None:
    import importlib

    try:
        tools = importlib.import_module(TOOLS_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name not in ("tools", TOOLS_MODULE):
            raise
        return
    tools.register(sub)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from dealer.edge.logs import configure_logging

    configure_logging("warning")  # every command logs JSON lines on stderr; some set their own level
    try:
        return int(args.func(args))
    except KeyboardInterrupt:  # Ctrl-C: no traceback
        return 130
    except BrokenPipeError:  # `dealer rtp ... | head`: the reader left; say nothing more
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    raise SystemExit(main())
