"""The web studio (``tools/web_studio.py``, the screens' demo and their browser tests) goes away
whole: ``close`` leaves no process behind, and a studio that fails to start stops what it had
started. What it does while it runs is ``tests/test_screens.py``'s."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tools.web_studio import StudioError, WebStudio
from tests.conftest import poll_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_close_stops_everything_and_a_failed_start_stops_what_it_started(tmp_path: Path) -> None:
    s = WebStudio(web_port=0, deal_interval=0.1, betting_seconds=2.5)
    with s:
        pids = [p.pid for p in s.procs.values()] + [s.mosquitto.proc.pid]
        assert len(pids) == 5 and all(_alive(p) for p in pids)
        own = s.dir
    poll_until(lambda: not any(_alive(p) for p in pids), 15, "every process of the studio gone")
    assert not own.exists()  # its own temporary folder goes; a folder the caller gave stays (below)

    with socket.socket() as busy:  # dealer web cannot listen: the studio's last part fails
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        kept = tmp_path / "kept"
        failed = WebStudio(kept, web_port=busy.getsockname()[1])
        with pytest.raises(StudioError, match="dealer web"):
            failed.start()
    assert failed.procs == {} and failed.mosquitto.proc is None
    assert (kept / "studio.toml").exists()
