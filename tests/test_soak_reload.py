"""Found by the fault soak: a SIGHUP reload computed every table's exact RTP again on the event
loop (seconds of CPU for Teen Patti and Sevenluck), so every table froze, scanner heartbeats
timed out and players' turns were played by the timer. A reload computes the RTP only of the
pay tables that change."""

from __future__ import annotations

import asyncio
from pathlib import Path

from structlog.testing import capture_logs

from dealer.edge import runner
from dealer.edge.config import load_settings
from dealer.edge.reload import reload_service
from dealer.edge.service import Service
from tests.conftest import wait_until


def _settings(tmp: Path, **t1: object):
    tables = [{"id": "T1", "game": "teen-patti", "betting_seconds": 30.0, "pause_seconds": 0.1,
               "scanner": {"kind": "mqtt", "reader_id": "SC1", "heartbeat_timeout": 60}} | t1,
              {"id": "T2", "game": "sevenluck", "auto_rounds": False,
               "scanner": {"kind": "mqtt", "reader_id": "SC2", "heartbeat_timeout": 60}}]
    return load_settings(service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False},
                         mqtt={"in_process": True}, tables=tables)


async def test_a_reload_computes_the_rtp_of_the_pay_tables_that_change_only(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    service = Service(s, bus=runner.build_bus(s))
    task = asyncio.create_task(service.run())
    try:
        await wait_until(lambda: service.ready.is_set(), what="the backend ready")
        stop = _settings(tmp_path, auto_rounds=False)
        with capture_logs() as logs:
            assert reload_service(service, lambda: stop, None)
        assert service.configs["T1"].auto_rounds is False
        assert not [e for e in logs if str(e.get("event", "")).startswith("table rtp")], logs
        # a pay table that changes is reported again (and a strict table outside its bounds refused)
        bounds = _settings(tmp_path, auto_rounds=False, rtp_bounds={"player_a": {"max": "99.00"}})
        with capture_logs() as logs:
            assert reload_service(service, lambda: bounds, None)
        assert {e.get("table") for e in logs if str(e.get("event", "")).startswith("table rtp")} == {"T1"}, logs
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
