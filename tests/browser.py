"""The browser tests' parts: Debian's Chromium driven by Playwright, a simulated studio with its
screens (``tools/web_studio.py``), what a page received on its WebSocket, screenshots.

Playwright's own browser download cannot work here (no internet): it drives ``/usr/bin/chromium``
(Debian's ``chromium``, which ``scripts/test`` installs), headless with ``--no-sandbox`` (the
tests run as root). Tests use its sync API from plain ``def`` tests (the sync API cannot run
inside pytest-asyncio's loop).

A module imports ``chromium`` and makes its studio with ``studio = studio_fixture(...)`` (its pace,
faults, seed), and marks itself ``pytestmark = pytest.mark.integration``: a studio starts processes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.web_studio import WebStudio
from tests.conftest import poll_until

CHROMIUM = Path("/usr/bin/chromium")


def screenshot_dir(default: Path) -> Path:
    """Where screenshots go: ``$DEALER_SCREENSHOTS`` (to refresh docs/screens/), else ``default``."""
    out = Path(os.environ.get("DEALER_SCREENSHOTS") or default)
    out.mkdir(parents=True, exist_ok=True)
    return out


def screenshot(page: Any, name: str, default: Path) -> Path:
    """Save ``page`` as ``NAME.png`` in ``screenshot_dir(default)``; returns the file."""
    path = screenshot_dir(default) / (name if name.endswith(".png") else f"{name}.png")
    page.screenshot(path=str(path))
    return path


def studio_fixture(**options: Any) -> Any:
    """A module-scoped pytest fixture that runs a ``WebStudio(**options)`` in the module's own
    temporary folder (kept with pytest's temporary folders: logs, journal, config) and closes it."""

    @pytest.fixture(scope="module")
    def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebStudio]:
        with WebStudio(tmp_path_factory.mktemp("studio"), **options) as s:
            yield s

    return studio


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Chromium (one per test module)."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail("chromium is not installed: run scripts/test (it installs Debian's chromium and chromium-driver)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


class Wire:
    """Every WebSocket frame a page received, in order, per WebSocket: each one is an MQTT stream
    from the broker (a reconnect starts a new one, which must be read on its own). Playwright's
    sync API delivers the frames only while it runs a call: make one (``page.evaluate("1")``)
    before reading them."""

    def __init__(self, page: Any) -> None:
        self.sockets: list[list[bytes]] = []
        page.on("websocket", self._socket)

    def _socket(self, ws: Any) -> None:
        frames: list[bytes] = []
        self.sockets.append(frames)
        ws.on("framereceived", lambda payload: frames.append(payload if isinstance(payload, bytes)
                                                             else payload.encode()))


def open_page(browser: Any, url: str, *, size: tuple[int, int] = (1280, 800), wire: bool = False) -> tuple[Any, Wire | None]:
    """A page in a fresh context (its own cookies and storage), with the page's errors collected
    in ``page.problems``; ``wire``: record its WebSocket frames."""
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.problems = problems  # type: ignore[attr-defined]
    rec = Wire(page) if wire else None
    page.goto(url)
    return page, rec


def state(page: Any) -> dict[str, Any]:
    """The page's ``window.screenState`` as JSON."""
    return page.evaluate("() => JSON.parse(JSON.stringify(window.screenState))")


def until(pred: Callable[[], Any], timeout: float, what: str, step: float = 0.25) -> Any:
    """Poll ``pred`` until it is truthy (its value is returned); fail naming ``what`` after ``timeout``."""
    return poll_until(pred, timeout, what, step=step)


__all__ = ["CHROMIUM", "Wire", "chromium", "open_page", "screenshot", "screenshot_dir", "state", "studio_fixture",
           "until"]
