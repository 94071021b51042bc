"""The two test tiers are honest (tests/conftest.py).

The fast tier (``scripts/test --fast``: ``-m "not integration"``) never starts a process, a
broker or a PTY: a test outside the integration tier that tries fails. And the tiers split the
suite: together they are every test, and no test is in both.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simulators.broker import MosquittoProcess
from simulators.pty_port import PtyPort
from tests.harness import ROOT

REFUSED = "a fast-tier test (started a process|opened a PTY)"


def test_a_fast_tier_test_cannot_start_a_process(tmp_path: Path) -> None:
    with pytest.raises(BaseException, match=REFUSED):
        subprocess.run(["true"], check=False)
    with pytest.raises(BaseException, match=REFUSED):
        os.fork()
    with pytest.raises(BaseException, match=REFUSED):
        MosquittoProcess(tmp_path).start()  # a broker is a process


async def test_a_fast_tier_test_cannot_start_a_process_from_the_event_loop() -> None:
    with pytest.raises(BaseException, match=REFUSED):
        await asyncio.create_subprocess_exec("true")


def test_a_fast_tier_test_cannot_open_a_pty(tmp_path: Path) -> None:
    with pytest.raises(BaseException, match=REFUSED):
        PtyPort(tmp_path, "shoe")


def test_the_refusal_is_not_an_exception_the_code_under_test_could_swallow() -> None:
    try:
        subprocess.run(["true"], check=False)
    except Exception:  # noqa: BLE001 (what careless code under test would do)
        pytest.fail("the refusal was caught as an Exception")
    except BaseException as refusal:  # noqa: BLE001
        assert "fast-tier test started a process" in str(refusal)


@pytest.mark.integration
def test_an_integration_test_may_start_a_process() -> None:
    assert subprocess.run([sys.executable, "-c", "pass"], check=False).returncode == 0


def _collected(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _ids(proc: subprocess.Popen[str]) -> set[str]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:] + out[-3000:]
    return {line for line in out.splitlines() if "::" in line}


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_the_two_tiers_together_are_the_whole_suite_and_no_test_is_in_both() -> None:
    everything, integration, fast = (_collected(), _collected("-m", "integration"),
                                     _collected("-m", "not integration"))
    everything, integration, fast = _ids(everything), _ids(integration), _ids(fast)
    assert integration and fast
    assert integration | fast == everything
    assert not integration & fast
    # a test lands in its tier by what it uses, without a list: a broker fixture, a module's
    # pytestmark, a slow pure run
    assert "tests/test_flood.py::test_a_flood_window_ends_on_its_own_with_one_summary" in integration  # broker
    assert "tests/test_flood.py::test_the_input_queue_drops_only_scanner_failures_beyond_its_cap" in fast
    assert f"tests/test_tiers.py::{test_an_integration_test_may_start_a_process.__name__}" in integration
    assert f"tests/test_tiers.py::{test_a_fast_tier_test_cannot_open_a_pty.__name__}" in fast
