"""``dealer deploy check`` refuses everything ``dealer run`` refuses, with the same line (issue
28): each case below is a configuration ``run`` refuses; both commands run as processes and
must print the same stderr and exit 2. ``run`` refuses before it connects to anything (the
broker URL here is a closed port: a refusal that came later would not be this list's)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from dealer.edge.journal import lock_journal
from tests.harness import dealer_env
from tests.harness_cli import run_cli

pytestmark = pytest.mark.integration  # dealer run as a process

KEY = "ab" * 32


def _config(tmp: Path, *, journal: Path | None = None, table: str = "", sup_key: Path | None = None,
            mode: int = 0o640) -> Path:
    cfg = tmp / "dealer.toml"
    security = ""
    if sup_key is not None:
        security = f'[[security.supervisors]]\nid = "sup-ana"\nkey_files = ["{sup_key}"]\n'
    cfg.write_text(f"""
[service]
journal_path = "{journal or tmp / 'journal.sqlite'}"
metrics_enabled = false

[mqtt]
url = "mqtt://127.0.0.1:1"

{security}
[[tables]]
id = "TP1"
game = "teen-patti"
{table}
[tables.scanner]
kind = "mqtt"
reader_id = "SC1"
""")
    cfg.chmod(mode)
    return cfg


def _secret(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def _cases(tmp: Path) -> dict[str, tuple[Path, str]]:
    """name -> (config, a phrase its refusal says)."""
    cases: dict[str, tuple[Path, str]] = {}

    def case(name: str, phrase: str, **kw: object) -> None:
        d = tmp / name
        d.mkdir()
        cases[name] = (_config(d, **kw), phrase)  # type: ignore[arg-type]

    case("no-journal-directory", "journal directory", journal=tmp / "absent" / "journal.sqlite")
    garbage = tmp / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    case("not-a-journal", "not a SQLite database", journal=garbage)
    case("not-hex-key", "must hold the key as hex digits", sup_key=_secret(tmp / "bad.key", "hello\n"))
    case("short-key", "-byte key; at least", sup_key=_secret(tmp / "short.key", "00" * 8))
    case("strict-rtp", "rtp_policy = \"strict\"",
         table='rtp_policy = "strict"\n[tables.rtp_bounds.tie]\nmin = "90"\n')
    case("group-writable-config", "writable by group or others", mode=0o664)
    case("several-at-once", "journal directory", journal=tmp / "absent2" / "j.sqlite",
         sup_key=_secret(tmp / "bad2.key", "zz\n"), mode=0o666)
    return cases


def test_check_and_run_refuse_the_same_configs_with_the_same_lines(tmp_path: Path) -> None:
    said: dict[str, str] = {}
    for name, (cfg, phrase) in _cases(tmp_path).items():
        check = run_cli("deploy", "check", "--config", str(cfg), timeout=120, env=dealer_env())
        run = run_cli("run", "--config", str(cfg), timeout=120, env=dealer_env())
        assert run.returncode == 2 and check.returncode == 2, (name, run.stderr, check.stderr)
        assert check.stderr == run.stderr, (name, check.stderr, run.stderr)
        assert phrase in run.stderr and run.stderr.startswith("dealer: refusing to start:"), (name, run.stderr)
        assert "Traceback" not in run.stderr and check.stdout == run.stdout == "", name
        said[name] = run.stderr
    lines = said["several-at-once"].splitlines()
    assert lines[0] == "dealer: refusing to start:" and len(lines) == 4, lines  # every reason, not the first


def test_a_journal_in_use_is_refused_by_both_and_a_good_config_is_ok(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    ok = run_cli("deploy", "check", "--config", str(cfg), timeout=120, env=dealer_env())
    assert (ok.returncode, ok.stdout.strip(), ok.stderr) == (0, f"{cfg}: ok", "")
    assert not (tmp_path / "journal.sqlite").exists()  # checked, never created
    fd = lock_journal(tmp_path / "journal.sqlite")  # another dealer process runs on this journal
    try:
        check = run_cli("deploy", "check", "--config", str(cfg), timeout=120, env=dealer_env())
        run = run_cli("run", "--config", str(cfg), timeout=120, env=dealer_env())
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert check.returncode == run.returncode == 2 and check.stderr == run.stderr
    assert "is in use by another dealer process" in run.stderr and f"pid {os.getpid()}" in run.stderr
