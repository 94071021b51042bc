"""docs/setup.md works word for word (issue 28: a studio stands it up from the docs alone).

Every ``dealer`` command of the guide and its configuration are taken from the page itself,
with only the host's paths moved into a temporary folder and the broker's port made free:
the test CA, the supervisor's key, ``dealer deploy users``, Mosquitto with the deployed
configuration and the two files it wrote, ``dealer deploy check``, ``dealer run`` as a
process, the supervisor's pause and resume (answered: 0, then a repeated resume refused with
3), a reload by SIGHUP. What the guide does with ``install``/``systemctl`` the test does by
copying files and starting processes; nothing else is written by hand."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from simulators.secure_broker import SecureMosquitto
from tests.conftest import poll_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "setup.md"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", GUIDE.read_text(), flags=re.S)


def dealer_lines() -> list[str]:
    return [line for block in blocks("sh") for line in block.splitlines() if line.startswith("dealer ")]


def test_every_dealer_command_of_the_guide_exists() -> None:
    """The guide names no command or option the parser does not know (a typo fails here)."""
    from dealer.cli.main import build_parser

    parser = build_parser()
    lines = dealer_lines()
    assert len(lines) >= 6, lines
    for line in lines:
        argv = shlex.split(line)[1:]
        if argv == ["--version"]:
            continue
        parser.parse_args(argv)  # SystemExit(2) on an unknown command or option


def test_the_guide_word_for_word(tmp_path: Path) -> None:
    moved = {"/etc/dealer": str(tmp_path / "etc"), "/var/lib/dealer": str(tmp_path / "var")}

    def here(text: str) -> str:
        for host, test in moved.items():
            text = text.replace(host, test)
        return text

    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DEALER_")} | {"PYTHONPATH": str(ROOT)}

    def dealer(line: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        assert line in dealer_lines(), f"not in docs/setup.md: {line}"
        return subprocess.run([sys.executable, "-m", "dealer", *shlex.split(here(line))[1:]], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)

    def step(prefix: str) -> str:
        [line] = [x for x in dealer_lines() if x.startswith(prefix)]
        return line

    # 1. install: the directories the guide makes
    for d in ("etc", "etc/supervisors", "var"):
        (tmp_path / d).mkdir(mode=0o750, exist_ok=True)
    assert dealer(step("dealer --version")).returncode == 0
    # 2. TLS: the guide's own command
    [tls] = [x for x in blocks("sh")[1].splitlines() if x.startswith("deploy/tls/make-test-ca.sh")]
    subprocess.run(["bash", *shlex.split(here(tls))], cwd=ROOT, check=True, capture_output=True, timeout=120)
    # the broker's port: the one the guide names, moved to a free one (the deployed configuration)
    (tmp_path / "mosq").mkdir()
    broker = SecureMosquitto(tmp_path / "mosq", tmp_path / "etc" / "tls", {"placeholder": "x"}, "")
    moved["mqtts://127.0.0.1:8883"] = broker.tls_url
    # 3. the configuration, as printed
    [toml] = blocks("toml")
    cfg = tmp_path / "etc" / "studio.toml"
    cfg.write_text(here(toml).replace("metrics_port = 9108", "metrics_port = 0"))
    cfg.chmod(0o640)
    # 4. keys and broker users
    for prefix in ("dealer supervisor keygen", "dealer deploy users"):
        done = dealer(step(prefix))
        assert done.returncode == 0, (prefix, done.stderr)
    broker.password_file.write_text((tmp_path / "etc" / "broker" / "passwd").read_text())  # install ... passwd
    broker.acl_file.write_text((tmp_path / "etc" / "broker" / "acl").read_text())  # install ... acl
    broker.start()  # systemctl restart mosquitto
    proc = None
    try:
        # 5. check, then start
        check = dealer(step("dealer deploy check"))
        assert (check.returncode, check.stderr) == (0, ""), check.stderr
        log = tmp_path / "run.log"
        proc = subprocess.Popen([sys.executable, "-m", "dealer", "run", "--config", str(cfg)], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=log.open("wb"))
        poll_until(lambda: '"backend started"' in (text := log.read_text()) and '"mqtt connected"' in text, 60,
                   "the backend started and connected", alive=proc, context=log.read_text)
        # 6. operate: every act answered
        pause = dealer(step("dealer supervisor pause"))
        assert pause.returncode == 0, pause.stderr
        resume = dealer(step("dealer supervisor resume"))
        assert resume.returncode == 0, resume.stderr
        again = dealer(step("dealer supervisor resume"))
        assert again.returncode == 3 and "refused by the backend" in again.stderr, again.stderr
        cfg.write_text(cfg.read_text().replace("betting_seconds = 15", "betting_seconds = 20"))
        proc.send_signal(signal.SIGHUP)  # systemctl reload dealer@studio
        poll_until(lambda: '"configuration reloaded"' in log.read_text(), 60, "the configuration reloaded",
                   alive=proc, context=log.read_text)
        assert proc.poll() is None
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        broker.stop()
    assert "Traceback" not in log.read_text()
