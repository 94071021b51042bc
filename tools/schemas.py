"""JSON Schemas of every wire message, generated from the pydantic models.

They are committed under ``docs/schemas/`` for consumers in other languages; a test
regenerates them and fails if the committed files drifted from the models.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from dealer.core.acks import ResultAck
from dealer.core.events import ACTION_ADAPTER
from dealer.core.messages import (PlayerMessage, PlayerState, RoundEvent, RoundResult, RoundResultPart, StationPrompt,
                                  TableHistory, TableState)
from dealer.edge.signing import SUPERVISOR_COMMAND_ADAPTER
from drivers.scanner_json import ScannerMessage

SCHEMAS: dict[str, TypeAdapter[Any]] = {
    "round-result.json": TypeAdapter(RoundResult),
    "round-result-part.json": TypeAdapter(RoundResultPart),
    "round-event.json": TypeAdapter(RoundEvent),
    "station-prompt.json": TypeAdapter(StationPrompt),
    "player-message.json": TypeAdapter(PlayerMessage),
    "table-state.json": TypeAdapter(TableState),
    "table-history.json": TypeAdapter(TableHistory),
    "player-state.json": TypeAdapter(PlayerState),
    "action.json": ACTION_ADAPTER,
    "scanner-message.json": TypeAdapter(ScannerMessage),
    "supervisor-command.json": SUPERVISOR_COMMAND_ADAPTER,
    "result-ack.json": TypeAdapter(ResultAck),
}
_INBOUND = {"action.json", "scanner-message.json", "supervisor-command.json", "result-ack.json"}  # validation-mode schemas


def render(name: str) -> str:
    schema = SCHEMAS[name].json_schema(mode="validation" if name in _INBOUND else "serialization")
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": f"studio/v1/{name}", **schema}
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def default_docs_dir() -> Path | None:
    """The ``docs/`` directory of the source tree this package runs from (found from the
    package, so any current directory will do), or None when there is none: an installed
    wheel carries no docs."""
    docs = Path(__file__).resolve().parent.parent / "docs"
    return docs if (docs / "schemas").is_dir() else None


def write_schemas(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in SCHEMAS:
        p = out / name
        p.write_text(render(name))
        paths.append(p)
    return paths


def check_schemas(out: Path) -> list[str]:
    """Names of committed schemas that are missing or differ from the models."""
    return [n for n in SCHEMAS if not (out / n).is_file() or (out / n).read_text() != render(n)]
