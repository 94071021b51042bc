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


async def supervisor_cli(*args: str) -> tuple[int, str, str]:
    """``dealer supervisor ARGS`` from a bare environment (this checkout and a system PATH
    only), awaited without blocking the loop: status, stdout, stderr."""
    proc = await asyncio.to_thread(run_cli, "supervisor", *args, cwd=None, timeout=90,
                                   env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return proc.returncode, proc.stdout, proc.stderr
