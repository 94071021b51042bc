"""No silent in-process bus (issue 14 item 6): ``dealer run`` without ``[mqtt].url`` refuses
to start unless the config asks for the in-process bus with ``[mqtt] in_process = true``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dealer.edge import runner
from dealer.edge.config import ConfigError, load_settings
from tools.demo import demo_settings
from dealer.edge.security import NO_BROKER, check_deployment
from drivers.bus import LocalBus
from drivers.mqtt import MqttBus
from tests.harness import dealer_env
from tests.harness_cli import run_cli
from tests.conftest import poll_until

pytestmark = pytest.mark.integration  # dealer run as a process

ROOT = Path(__file__).resolve().parents[1]


def _config(tmp: Path, mqtt: str) -> Path:
    cfg = tmp / "dealer.toml"
    cfg.write_text(f"""
[service]
journal_path = "{tmp / 'journal.sqlite'}"
metrics_enabled = false

{mqtt}
""")
    cfg.chmod(0o640)
    return cfg


@pytest.mark.parametrize("mqtt", ["", "[mqtt]\nkeepalive = 10\n", "[mqtt]\nin_process = false\n"])
def test_dealer_run_without_a_broker_url_refuses_in_one_line(tmp_path: Path, mqtt: str) -> None:
    proc = run_cli("run", "--config", str(_config(tmp_path, mqtt)), timeout=30, env=dealer_env())
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"dealer: refusing to start: {NO_BROKER}"], lines
    assert "mqtt.url" in lines[0] and "in_process = true" in lines[0]
    assert not (tmp_path / "journal.sqlite").exists()  # refused before anything was opened


def test_deploy_check_reports_the_missing_broker(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "")
    proc = run_cli("deploy", "check", "--config", str(cfg), timeout=30, env=dealer_env())
    assert proc.returncode == 2 and proc.stderr.strip() == f"dealer: refusing to start: {NO_BROKER}", \
        proc.stdout + proc.stderr
    assert check_deployment(load_settings(cfg), cfg) == [NO_BROKER]
    assert check_deployment(load_settings(_config(tmp_path, "[mqtt]\nin_process = true\n")), cfg) == []
    assert check_deployment(load_settings(_config(tmp_path, '[mqtt]\nurl = "mqtt://127.0.0.1:1883"\n')), cfg) == []


def test_in_process_and_a_url_together_are_a_config_error(tmp_path: Path) -> None:
    cfg = _config(tmp_path, '[mqtt]\nurl = "mqtt://127.0.0.1:1883"\nin_process = true\n')
    with pytest.raises(ConfigError, match=r"mqtt.*in_process = true name two buses"):
        load_settings(cfg)
    proc = run_cli("run", "--config", str(cfg), timeout=30, env=dealer_env())
    assert proc.returncode == 2 and "in_process" in proc.stderr and "Traceback" not in proc.stderr


def test_build_bus_follows_the_config_and_never_falls_back(tmp_path: Path) -> None:
    assert isinstance(runner.build_bus(load_settings(mqtt={"in_process": True})), LocalBus)
    assert isinstance(runner.build_bus(load_settings(mqtt={"url": "mqtt://127.0.0.1:1883"})), MqttBus)
    with pytest.raises(ConfigError, match="in_process = true"):
        runner.build_bus(load_settings())


def test_the_demo_asks_for_the_in_process_bus_explicitly(tmp_path: Path) -> None:
    local = demo_settings(tmp_path, "/dev/null", broker=None, betting_seconds=1.0)
    assert local.mqtt.in_process and local.mqtt.url is None
    assert check_deployment(local, None) == []
    remote = demo_settings(tmp_path, "/dev/null", broker="mqtt://127.0.0.1:1883", betting_seconds=1.0)
    assert remote.mqtt.url == "mqtt://127.0.0.1:1883" and not remote.mqtt.in_process


def test_dealer_run_starts_on_the_in_process_bus_when_asked(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "[mqtt]\nin_process = true\n")
    err = tmp_path / "stderr.log"
    env = dealer_env()
    proc = subprocess.Popen([sys.executable, "-m", "dealer", "run", "--config", str(cfg)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=err.open("wb"))
    try:
        poll_until(lambda: any(json.loads(line).get("event") == "backend started"
                               for line in err.read_text().splitlines()),
                   30, "the backend to say it started", alive=proc, context=lambda: err.read_text()[-2000:])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
