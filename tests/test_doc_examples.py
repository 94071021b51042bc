"""The example messages in docs/mqtt-topics.md are what the code publishes (issue 14 item 11):
built by the pure core from a scripted round, compared with the doc's JSON blocks, and
rewritten by ``dealer schemas``."""

from __future__ import annotations

import pytest
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from tools import doc_examples
from dealer.core.messages import RoundEvent, RoundResult, StationPrompt
from tests.harness_docs import MQTT_TOPICS as DOC

ROOT = Path(__file__).resolve().parent.parent


def test_the_docs_examples_are_what_the_code_publishes() -> None:
    assert doc_examples.marked(DOC.read_text()) == ["ack-voided", "event-card-registered", "prompt-rescan",
                                                    "result-completed", "result-voided"]
    stale = doc_examples.check_examples(DOC)
    assert stale == [], f"docs/mqtt-topics.md examples {stale} differ from the code: run `dealer schemas`"


def test_the_acknowledgement_example_hashes_the_voided_results_line_in_the_doc() -> None:
    """A reader checks §3's worked example by hashing §4.6's compact voided result: that line is
    the published bytes, and the acknowledgement carries their SHA-256 (protocol 1.1)."""
    blocks = {m.group("name"): m.group("body") for m in doc_examples._BLOCK.finditer(DOC.read_text())}
    ack = json.loads(blocks["ack-voided"])
    voided = json.loads(blocks["result-voided"])
    assert ack == {"idempotency_key": voided["idempotency_key"],
                   "result_sha256": hashlib.sha256(blocks["result-voided"].encode()).hexdigest()}


def test_the_examples_come_from_the_round_the_doc_describes() -> None:
    made = doc_examples.examples()
    done = RoundResult.model_validate(made["result-completed"])
    assert done.outcome == "COMPLETED" and done.winner == "B" and done.accepted_bets.count == 4
    assert done.cards == {"A1": "QH", "B1": "9C", "A2": "QD", "B2": "5C", "A3": "7S", "B3": "2C"}
    effects = doc_examples.play()
    reasons = [e.reason for e in effects if isinstance(e, StationPrompt) and e.kind == "RESCAN"]
    assert reasons == ["noread", "duplicate_card"]  # a no-read and a duplicate card during the deal
    refused = [e for e in effects if isinstance(e, RoundEvent) and e.event == "bet_rejected"]
    assert len(refused) == 1 and "limit" in json.dumps(refused[0].data)  # one bet over the limit
    voided = RoundResult.model_validate(made["result-voided"])
    assert voided.outcome == "VOIDED" and voided.refund_all and voided.reason.startswith("voided by supervisor")
    # every doc block parses as JSON equal to the example
    text = DOC.read_text()
    for name, value in made.items():
        block = text.split(f"<!-- example: {name} -->\n```json\n", 1)[1].split("\n```", 1)[0]
        assert json.loads(block) == value, name


def test_a_changed_block_is_found_and_rewritten(tmp_path: Path) -> None:
    doc = tmp_path / "mqtt-topics.md"
    shutil.copy(DOC, doc)
    original = doc.read_text()
    made = doc_examples.examples()
    old_hash = made["result-completed"]["rules_hash"]
    doc.write_text(original.replace(f'"rules_hash": "{old_hash}"', '"rules_hash": "e938048e"', 1)
                   .replace('"kind":"RESCAN","position":"B2"', '"kind":"RESCAN","position":"A2"', 1))
    assert doc_examples.check_examples(doc) == ["prompt-rescan", "result-completed"]
    assert doc_examples.write_examples(doc) == ["prompt-rescan", "result-completed"]
    assert doc.read_text() == original
    assert doc_examples.write_examples(doc) == []


@pytest.mark.integration
def test_dealer_schemas_check_names_a_stale_doc_example(tmp_path: Path) -> None:
    """``dealer schemas --check`` (the source tree's docs) fails on a stale example; run on a
    copy of the tree's docs so the real one is never touched."""
    code = ("import sys, tools.schemas as s; from pathlib import Path; "
            "s.default_docs_dir = lambda: Path(sys.argv[1]); "
            "from dealer.cli.main import main; sys.exit(main(sys.argv[2:]))")
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    (docs / "mqtt-topics.md").write_text((docs / "mqtt-topics.md").read_text().replace('"step":4,"of":6',
                                                                                        '"step":5,"of":6', 1))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, str(docs), *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})

    check = run("schemas", "--check")
    assert check.returncode == 1 and "stale example" in check.stderr and "prompt-rescan" in check.stderr
    assert "Traceback" not in check.stderr
    write = run("schemas")
    assert write.returncode == 0, write.stderr
    assert (docs / "mqtt-topics.md").read_text() == DOC.read_text()
    assert run("schemas", "--check").returncode == 0
