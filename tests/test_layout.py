"""The layout is the architecture: what may import what (README, "Where things live").

The pure core (``dealer.core``) and the games (``dealer.games``) import nothing from the
edge, the house players, the CLI, the tools, the drivers or the simulators, and no IO module.
The runtime (everything under ``dealer``) never imports the tools or the simulators at module
level. Read from the source with :mod:`ast`, so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Modules whose import means IO, a clock, randomness or threads.
IO_MODULES = frozenset({"asyncio", "socket", "sqlite3", "subprocess", "threading", "multiprocessing",
                        "concurrent", "os", "time", "random", "secrets", "uuid", "serial", "aiomqtt",
                        "psycopg", "prometheus_client", "structlog", "logging", "signal", "select",
                        "shutil", "tempfile", "pathlib", "io", "platform", "datetime"})


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in the file (top level or inside a function)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def modules(*packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


PURE = ("dealer/core", "dealer/games")
FORBIDDEN_FOR_PURE = ("dealer.edge", "dealer.house", "dealer.cli", "tools", "drivers", "simulators")


@pytest.mark.parametrize("path", modules(*PURE), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pure_core_imports_neither_the_edge_nor_io(path: Path) -> None:
    bad = sorted(n for n in imports_of(path) if _under(n, FORBIDDEN_FOR_PURE) or n.split(".")[0] in IO_MODULES)
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}: the core is pure (README, Where things live)"


@pytest.mark.parametrize("path", modules("dealer", "drivers"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_runtime_never_imports_the_simulators(path: Path) -> None:
    bad = sorted(n for n in imports_of(path) if _under(n, ("simulators",)))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}: simulators are test and tool code"


@pytest.mark.parametrize("path", modules("dealer", "drivers"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_runtime_imports_tools_only_through_the_cli_registry(path: Path) -> None:
    bad = sorted(n for n in imports_of(path) if _under(n, ("tools",)))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}: tool commands load by name (dealer/cli/main.py)"


@pytest.mark.parametrize("path", modules("dealer/web"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_screens_server_knows_nothing_of_the_backend(path: Path) -> None:
    """``dealer web`` serves files and forwards bytes: it imports no part of the backend, so the
    screens can never reach into a table, the journal or the hot path (docs/screens.md)."""
    bad = sorted(n for n in imports_of(path) if _under(n, ("dealer", "drivers")))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}: the screens are MQTT clients, nothing more"


def test_the_checker_sees_a_lazy_import(tmp_path: Path) -> None:
    """The check itself can fail: an import inside a function is found."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from dealer.edge import journal\n    import time\n")
    assert {"dealer.edge", "dealer.edge.journal", "time"} <= imports_of(f)


@pytest.mark.parametrize("path", modules("dealer/core"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_imports_no_game(path: Path) -> None:
    """The game contract lives in the core and the registry is handed in (issue 30): the one
    arrow of the house that ran back up, core -> games, stays gone."""
    bad = sorted(n for n in imports_of(path) if _under(n, ("dealer.games", "dealer.house")))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}: the edge hands the core its games"


GAME_NAMES = frozenset({"stud", "seotda", "matgo", "sevenluck", "teen-patti", "teen_patti"})


def game_names_in_code(path: Path) -> list[tuple[int, str]]:
    """String constants of ``path`` that are a game's name, docstrings aside: code that branches
    on a game (a game brings its own limits and seeds instead)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
            and n.value.lower() in GAME_NAMES]


@pytest.mark.parametrize("path", modules("dealer/core", "dealer/edge"), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_game_name_in_the_core_or_the_edge(path: Path) -> None:
    found = game_names_in_code(path)
    assert not found, f"{path.relative_to(ROOT)} names a game at {found}: the game brings what differs"


def test_the_game_name_check_can_fail(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text('"""Stud aside."""\ndef f(g):\n    """stud"""\n    return g == "stud"\n')
    assert game_names_in_code(f) == [(4, "stud")]
