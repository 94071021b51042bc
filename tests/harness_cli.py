"""Test harness: the ``dealer`` command line as a process, what a shell sees. One ``run_cli``;
a test module that wants another working directory, time bound or environment says so at
the call (the defaults are what most tests run with)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.harness import ROOT


def run_cli(*args: str | Path, cwd: Path | None = ROOT, timeout: float = 60,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m dealer ARGS`` from ``cwd`` (the checkout unless given), its output captured;
    ``env`` None: the test runner's own environment."""
    return subprocess.run([sys.executable, "-m", "dealer", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env)


def with_checkout() -> dict[str, str]:
    """The test runner's environment with this checkout on ``PYTHONPATH``."""
    return os.environ | {"PYTHONPATH": str(ROOT)}


def without_dealer_settings() -> dict[str, str]:
    """The test runner's environment without its ``DEALER_*`` settings (a command reads only
    the config it is given)."""
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("DEALER_")}


async def supervisor_cli(*args: str, env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """``dealer supervisor ARGS`` as a process the loop awaits (several may run at once): status,
    stdout, stderr. ``env`` None: a bare environment, this checkout and a system PATH only."""
    env = env if env is not None else {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "dealer", "supervisor", *args, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
