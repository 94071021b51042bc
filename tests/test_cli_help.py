"""The command's own words (issue 28): ``dealer --version`` says the version each round's rules
record, and every command's ``--help`` is plain words (no reStructuredText markup) with a
description for the production commands."""

from __future__ import annotations

import argparse
import contextlib
import io
import re

import pytest

from dealer.cli.main import build_parser, main
from dealer.core.rules import software_version


def test_version_is_the_one_the_rules_record(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"dealer {software_version()} (Python 3.")


def _parsers(p: argparse.ArgumentParser, path: str = "dealer") -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(path, p)]
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _parsers(sub, f"{path} {name}")
    return out


def test_every_help_is_plain_words() -> None:
    parsers = _parsers(build_parser())
    assert len(parsers) > 30
    for path, parser in parsers:
        with contextlib.redirect_stdout(io.StringIO()):
            text = parser.format_help()
        assert "``" not in text and not re.search(r":(?:class|func|mod|meth):`", text), (path, text)
    helps = dict(parsers)
    assert helps["dealer run"].description and "deploy check" in helps["dealer run"].description


def test_a_tls_failure_is_said_in_words_with_the_ssl_reason_kept() -> None:
    from drivers.mqtt import explain

    raw = ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate "
           "(_ssl.c:1006)")
    assert explain(raw) == ("the broker's TLS certificate is not signed by a CA this side trusts: give the CA file "
                            "that signed it (ca_file, --ca-file) [CERTIFICATE_VERIFY_FAILED]")
    assert "not for this host name" in explain("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                                               "Hostname mismatch, certificate is not valid for 'x'. (_ssl.c:1006)")
    assert "is this its plain (mqtt://) port?" in explain("[SSL: WRONG_VERSION_NUMBER] wrong version number")
    assert explain("[Errno 111] Connection refused") == "[Errno 111] Connection refused"
