"""The ``dealer`` command with bad input (issue 14 item 9): one clear line on stderr and exit
status 2, never a traceback, never pydantic's raw text; help on every option; defaults that
work from any directory; recall and audit that never create a journal."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dealer.cli.main import build_parser
from dealer.cli.args import options_without_help, walk
from dealer.edge.config import ConfigError, load_settings
from dealer.core.events import OpenRound
from dealer.edge.journal import Batch, Journal
from tests.harness import dealer_env
from tests.harness_cli import run_cli

pytestmark = pytest.mark.integration  # the CLI as a process

ROOT = Path(__file__).resolve().parent.parent


def run_main(args: list[str], cwd: Path, capsys: pytest.CaptureFixture[str],
             monkeypatch: pytest.MonkeyPatch) -> subprocess.CompletedProcess[str]:
    """The same command in this process (fast): ``dealer.cli.main.main`` from ``cwd``."""
    from dealer.cli.main import main

    monkeypatch.chdir(cwd)
    for key in [k for k in os.environ if k.upper().startswith("DEALER_")]:
        monkeypatch.delenv(key)
    capsys.readouterr()
    try:
        status = main(args)
    except SystemExit as exc:  # argparse
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, status, out, err)


def one_line(proc: subprocess.CompletedProcess[str], *words: str, status: int = 2) -> str:
    assert proc.returncode == status, (proc.returncode, proc.stdout[-1000:], proc.stderr[-3000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "errors.pydantic.dev" not in proc.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- help on every option ----------------------------------------------------------------


def test_every_option_of_every_subcommand_has_help() -> None:
    """Walks the whole argparse tree (other modules' subcommands included): an option or a
    subcommand added without a help text fails here."""
    parser = build_parser()
    progs = [prog for prog, _ in walk(parser)]
    assert {"dealer demo", "dealer run", "dealer hand", "dealer rtp", "dealer schemas", "dealer recall",
            "dealer audit verify", "dealer bench latency", "dealer soak"} <= set(progs)
    assert options_without_help(parser) == []


def test_the_help_walk_finds_an_option_without_help() -> None:
    parser = build_parser()
    sub = next(p for prog, p in walk(parser) if prog == "dealer recall")
    sub.add_argument("--undocumented")
    assert options_without_help(parser) == ["dealer recall --undocumented"]


# --- one line and exit 2 -------------------------------------------------------------------

BAD = {
    "demo: a broker URL that is not one": (["demo", "--broker", "http://x"], ["--broker", "mqtt://host:port"]),
    "demo: no betting window": (["demo", "--betting-seconds", "0"], ["--betting-seconds", "> 0"]),
    "demo: a negative betting window": (["demo", "--betting-seconds", "-1"], ["--betting-seconds"]),
    "demo: nan seconds": (["demo", "--betting-seconds", "nan"], ["--betting-seconds", "finite"]),
    "demo: zero rounds": (["demo", "--rounds", "0"], ["--rounds", "from 1"]),
    "demo: rounds not a number": (["demo", "--rounds", "many"], ["--rounds", "whole number"]),
    "demo: unknown game": (["demo", "--game", "baccarat"], ["--game", "baccarat"]),
    "unknown subcommand": (["deal"], ["invalid choice", "deal"]),
    "no subcommand": ([], ["required"]),
    "run without --config": (["run"], ["--config"]),
    "run with a missing config": (["run", "--config", "missing.toml"], ["missing.toml", "does not exist"]),
    "hand: unknown game": (["hand", "poker", "AS", "--vs", "KD"], ["poker", "matgo"]),
    "hand: a house option of the wrong type": (
        ["hand", "sevenluck", "KD", "4S", "2H", "--vs", "QS", "5D", "3C", "--option", "seats=many"],
        ["--option seats", "integer"]),
    "hand: a bad pay ratio": (
        ["hand", "teen-patti", "AS", "KD", "QC", "--vs", "2H", "3H", "4H", "--option", "main_ratio=abc"],
        ["main_ratio", "plain decimal"]),
    "hand: an unknown house option": (
        ["hand", "teen-patti", "AS", "KD", "QC", "--vs", "2H", "3H", "4H", "--option", "colour=red"],
        ["colour"]),
    "hand: --go for another game": (
        ["hand", "teen-patti", "AS", "KD", "QC", "--vs", "2H", "3H", "4H", "--go", "1"], ["--go", "matgo"]),
    "hand matgo: a 52-card code": (["hand", "matgo", "AS", "--vs", "none"], ["AS", "Hwatu"]),
    "hand matgo: a card in both piles": (["hand", "matgo", "01G", "03G", "--vs", "01G"], ["both", "01G"]),
    "hand matgo: a card twice": (["hand", "matgo", "01G,01G", "--vs", "none"], ["duplicate", "01G"]),
    "hand matgo: two --vs": (["hand", "matgo", "01G", "--vs", "03G", "--vs", "08G"], ["exactly one --vs"]),
    "hand matgo: a negative Go count": (["hand", "matgo", "01G", "--vs", "none", "--go", "-1"], ["--go"]),
    "hand matgo: a bad point value": (["hand", "matgo", "01G", "--vs", "none", "--option", "point_value=0"],
                                      ["point_value", "positive"]),
    "rtp: a game without a report": (["rtp", "stud"], ["stud", "teen-patti"]),
    "recall: zero rounds": (["recall", "TP1", "--config", "x.toml", "--rounds", "0"], ["--rounds"]),
    "audit verify with nothing to verify": (["audit", "verify"], ["--config", "--journal"]),
    "bench latency: no tables": (["bench", "latency", "--tables", "0"], ["--tables"]),
    "bench latency: a bad broker": (["bench", "latency", "--broker", "localhost:1883"], ["--broker"]),
    "bench latency: processes without a private journal": (["bench", "latency", "--processes", "2"],
                                                            ["--processes", "--journal private"]),
    "soak: a fault rate over 1": (["soak", "--fault-rate", "2"], ["--fault-rate", "from 0 to 1"]),
    "soak: no tables": (["soak", "--tables", "0"], ["--tables"]),
    "matgo-arena: no deals": (["matgo-arena", "--deals", "0"], ["--deals"]),
    "bench fuzz: negative inputs": (["bench", "fuzz", "--inputs", "-5"], ["--inputs"]),
    "outbox resend: a zero timeout": (["outbox", "resend", "--config", "x.toml", "--all", "--timeout", "0"],
                                      ["--timeout"]),
    "supervisor void: a broker URL that is not one": (
        ["supervisor", "void", "TP1", "TP1-000001", "--reason", "r", "--supervisor", "s", "--key-file", "k",
         "--broker", "http://x"], ["mqtt"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    args, words = BAD[case]
    one_line(run_main(args, tmp_path, capsys, monkeypatch), *words)
    assert list(tmp_path.iterdir()) == []  # and nothing was created on the way


def test_bad_input_from_the_real_command(tmp_path: Path) -> None:
    """The same as a process: what a shell sees."""
    one_line(run_cli("demo", "--rounds", "0", cwd=tmp_path, env=dealer_env()), "dealer demo: argument --rounds")
    one_line(run_cli("hand", "matgo", "01G", "--vs", "01G", cwd=tmp_path, env=dealer_env()), "dealer hand:", "both")


def test_demo_with_an_unreachable_broker_says_so_at_once(tmp_path: Path) -> None:
    url = f"mqtt://127.0.0.1:{closed_port()}"
    line = one_line(run_cli("demo", "--broker", url, cwd=tmp_path, env=dealer_env()), "cannot reach the broker", url)
    assert "refused" in line.lower()


def test_demo_with_a_broker_that_never_answers_gives_up_after_a_bounded_wait(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts the TCP connection, never says a word of MQTT
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"mqtt://127.0.0.1:{silent.getsockname()[1]}"
        one_line(run_cli("demo", "--broker", url, cwd=tmp_path, env=dealer_env()), "cannot reach the broker", url, "no answer within")


def test_bench_latency_with_an_unreachable_broker_says_so_at_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"mqtt://127.0.0.1:{closed_port()}"
    one_line(run_main(["bench", "latency", "--broker", url], tmp_path, capsys, monkeypatch),
             "dealer bench latency: cannot reach the broker", url)


def test_soak_refuses_a_workdir_that_is_not_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The soak writes, mounts a file system and deletes in its workdir: never in one that holds
    anything (dealer soak --workdir /etc would litter /etc). Refused before anything starts."""
    import tools.soak as soak

    def no_soak(*_a: object, **_k: object) -> None:
        raise AssertionError("the soak must not start")

    monkeypatch.setattr(soak, "run_soak", no_soak)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    one_line(run_main(["soak", "--workdir", str(busy)], tmp_path, capsys, monkeypatch), "--workdir", "not empty")
    one_line(run_main(["soak", "--workdir", str(busy / "notes.txt")], tmp_path, capsys, monkeypatch),
             "not a directory")
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]


def test_config_errors_are_one_line_naming_the_key_without_pydantics_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "dealer.toml"
    cfg.write_text('[service]\nmetrics_port = "lots"\n\n[[tables]]\nid = "TP1"\ngame = "teen-patti"\n'
                   'betting_seconds = 0\n[tables.scanner]\nkind = "mqtt"\nreader_id = "SC1"\n'
                   '[tables.options]\ntie_ratio = "abc"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(cfg)
    msg = str(err.value)
    assert "\n" not in msg and "pydantic" not in msg and "Value error" not in msg
    for key in ("service.metrics_port", "tables.0.betting_seconds", "tables.0.options.tie_ratio: amount 'abc'"):
        assert key in msg, msg
    for args in (["run", "--config", str(cfg)], ["deploy", "check", "--config", str(cfg)],
                 ["recall", "TP1", "--config", str(cfg)], ["audit", "verify", "--config", str(cfg)],
                 ["rtp", "teen-patti", "--config", str(cfg), "--table", "TP1"],
                 ["outbox", "list", "--config", str(cfg)]):
        one_line(run_main(args, tmp_path, capsys, monkeypatch), "tables.0.betting_seconds", "service.metrics_port")


# --- defaults that work from any directory -------------------------------------------------


def test_schemas_check_works_from_any_directory(tmp_path: Path) -> None:
    proc = run_cli("schemas", "--check", cwd=tmp_path, env=dealer_env())
    assert proc.returncode == 0, proc.stderr
    assert list(tmp_path.iterdir()) == []
    one_line(run_cli("schemas", "--check", "--out", "nowhere", cwd=tmp_path, env=dealer_env()), "no schemas directory", "nowhere")


def test_schemas_out_writes_only_the_schemas(tmp_path: Path) -> None:
    proc = run_cli("schemas", "--out", "s", cwd=tmp_path, env=dealer_env())
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == sorted(
        p.name for p in (ROOT / "docs" / "schemas").iterdir())
    assert run_cli("schemas", "--check", "--out", "s", cwd=tmp_path, env=dealer_env()).returncode == 0


def test_schemas_without_a_source_tree_asks_for_out(tmp_path: Path) -> None:
    """An installed package has no docs/ beside it: said, and nothing written (the package is
    made to look installed by moving where its module says it lives)."""
    code = ("import sys, tools.schemas as s; "
            "s.__file__ = sys.argv[1] + '/site-packages/tools/schemas.py'; "
            "from dealer.cli.main import main; sys.exit(main(sys.argv[2:]))")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DEALER_")} | {"PYTHONPATH": str(ROOT)}
    for args in (["schemas", "--check"], ["schemas"]):
        proc = subprocess.run([sys.executable, "-c", code, str(tmp_path), *args], cwd=tmp_path, capture_output=True,
                              text=True, env=env, timeout=60)
        one_line(proc, "no docs/schemas directory", "--out")
    assert list(tmp_path.iterdir()) == []


def _journal_with_a_round(path: Path) -> str:
    journal = Journal(path, fsync=False)
    rid = f"TP1-{journal.journal_id}-000001"
    journal.commit(Batch(events=[("TP1", rid, OpenRound(round_id=rid, at=1767261600000))]))
    journal.close()
    return rid


def _config(directory: Path, journal: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    cfg = directory / "dealer.toml"
    cfg.write_text(f'[service]\njournal_path = "{journal}"\n\n[[tables]]\nid = "TP1"\ngame = "teen-patti"\n'
                   '[tables.scanner]\nkind = "mqtt"\nreader_id = "SC1"\n')
    return cfg


def test_relative_paths_in_a_config_are_relative_to_its_directory(tmp_path: Path) -> None:
    cfg = _config(tmp_path / "etc", "journal.sqlite")
    rid = _journal_with_a_round(tmp_path / "etc" / "journal.sqlite")
    assert load_settings(cfg).service.journal_path == tmp_path / "etc" / "journal.sqlite"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for cwd in (elsewhere, tmp_path):
        recall = run_cli("recall", "TP1", "--config", str(cfg.relative_to(tmp_path) if cwd == tmp_path else cfg),
                         "--json", cwd=cwd, env=dealer_env())
        assert recall.returncode == 0, recall.stderr
        assert [r["round_id"] for r in json.loads(recall.stdout)] == [rid]
        verify = run_cli("audit", "verify", "--config", str(cfg), cwd=cwd, env=dealer_env())
        assert verify.returncode == 0, verify.stderr
        assert json.loads(verify.stdout)["ok"] is True
    assert list(elsewhere.iterdir()) == []
    # without a config file (keyword settings), a relative path stays relative to the current directory
    assert load_settings(service={"journal_path": "j.sqlite"}).service.journal_path == Path("j.sqlite")


def test_recall_and_audit_refuse_a_journal_that_does_not_exist_and_never_create_one(tmp_path: Path) -> None:
    cfg = _config(tmp_path / "etc", "journal.sqlite")
    missing = tmp_path / "etc" / "journal.sqlite"
    one_line(run_cli("recall", "TP1", "--config", str(cfg), cwd=tmp_path, env=dealer_env()), "dealer recall: no journal at",
             str(missing))
    one_line(run_cli("audit", "verify", "--config", str(cfg), cwd=tmp_path, env=dealer_env()), "dealer audit verify: no journal at",
             str(missing))
    one_line(run_cli("audit", "verify", "--journal", "gone.sqlite", cwd=tmp_path, env=dealer_env()), "no journal at gone.sqlite")
    one_line(run_cli("recall", "TP1", "--config", str(_config(tmp_path / "d", str(tmp_path / "d"))), cwd=tmp_path, env=dealer_env()),
             "is not a file")
    assert sorted(p.name for p in (tmp_path / "etc").iterdir()) == ["dealer.toml"]


def test_recall_and_audit_leave_the_journal_file_untouched(tmp_path: Path) -> None:
    """Read-only: no schema, no migration, no id written into a journal under audit."""
    cfg = _config(tmp_path / "etc", "journal.sqlite")
    path = tmp_path / "etc" / "journal.sqlite"
    _journal_with_a_round(path)
    before = path.read_bytes()
    assert run_cli("recall", "TP1", "--config", str(cfg), cwd=tmp_path, env=dealer_env()).returncode == 0
    assert run_cli("audit", "verify", "--journal", str(path), cwd=tmp_path, env=dealer_env()).returncode == 0
    assert path.read_bytes() == before
    one_line(run_cli("recall", "TP2", "--config", str(cfg), cwd=tmp_path, env=dealer_env()), "TP2", "not in this configuration")


def test_a_journal_from_before_segments_and_journal_ids_is_read_without_being_changed(tmp_path: Path) -> None:
    """Read-only means no migration either: an old journal is read as it is (no segments
    table: none rolled; no journal id: round ids without a series)."""
    import sqlite3

    from dealer.edge.journal import JournalError
    from dealer.edge.segments import verify

    path = tmp_path / "old.sqlite"
    journal = Journal(path, fsync=False)
    journal.commit(Batch(events=[("TP1", "TP1-000001", OpenRound(round_id="TP1-000001", at=1767261600000))]))
    journal.close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE segments")
        db.execute("DROP TABLE meta")
    db.close()
    before = path.read_bytes()
    old = Journal.open_read_only(path)
    try:
        assert old.journal_id == "" and old.journal_id_source == "none"
        assert [r.round_id for r in old.rows("TP1")] == ["TP1-000001"]
        assert verify(old, []).ok
    finally:
        old.close()
    assert path.read_bytes() == before
    with pytest.raises(JournalError, match="no journal at"):
        Journal.open_read_only(tmp_path / "none.sqlite")
    (tmp_path / "empty.sqlite").write_bytes(b"")
    with pytest.raises(JournalError, match="not a dealer journal"):
        Journal.open_read_only(tmp_path / "empty.sqlite")
