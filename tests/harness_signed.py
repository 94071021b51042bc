"""Test harness: a signed reader at the backend. Its key in a file, the one teen-patti table
(``TABLE``) on a scanner the test describes, and the frames the backend rejected by reason."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from dealer.edge.config import load_settings
from tests.harness import TABLE


def key_file(tmp: Path, key: bytes, *, private: bool = False) -> Path:
    """The key in hex in a new file in ``tmp``; readable by its owner only if ``private``."""
    path = tmp / f"{uuid.uuid4().hex[:6]}.hex"
    path.write_text(key.hex() + "\n")
    if private:
        path.chmod(0o600)
    return path


def scanner_settings(tmp: Path, url: str, scanner: dict[str, Any]) -> Any:
    return load_settings(
        service={"journal_path": tmp / "journal.sqlite", "metrics_enabled": False},
        mqtt={"url": url, "client_id": f"backend-{uuid.uuid4().hex[:6]}"},
        tables=[{"id": TABLE, "game": "teen-patti", "betting_seconds": 0.3, "pause_seconds": 0.1, "scanner": scanner}],
    )


def rejected(service: Any, reader: str, reason: str) -> float:
    """How many of ``reader``'s frames the backend rejected for ``reason``."""
    return service.metrics.frames_rejected.labels(reader=reader, reason=reason)._value.get()
