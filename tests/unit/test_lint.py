"""The static checks are part of the suite, so a red check fails CI like a failing test:

- ruff lint and format on src, tests and benchmarks;
- mypy --strict on the whole package (configuration in pyproject.toml, [tool.mypy]);
- the layer arrows of docs/architecture.md, as import-linter contracts in pyproject.toml;
- no import cycle anywhere in src/specmon (grimp's graph: every module's imports at top level,
  inside functions and under TYPE_CHECKING alike), so each module can be read, tested and
  replaced from the bottom up;
- the tests' own layout (docs/testing.md, "Layout of tests/"): no import from a test module
  (`test_*.py`) or a conftest, nor of another tests module's private (underscore) names; a helper
  used from another folder or from benchmarks/ lives in tests/support/ (or is the real-vLLM
  harness, tests/real_vllm/); tests modules are imported by their absolute name.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest
from importlinter.cli import EXIT_STATUS_SUCCESS, lint_imports

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
TESTS = ROOT / "tests"
TREES = ["src", "tests", "benchmarks"]

# ---------------------------------------------------------------- ruff


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *TREES], capture_output=True, text=True, cwd=ROOT
    )


def test_ruff_check_is_clean() -> None:
    result = _ruff("check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = _ruff("format", "--check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- mypy


@pytest.mark.slow
def test_mypy_strict_is_clean_on_src() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "src/specmon"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- layers (import-linter)


def test_import_contracts_hold(capsys) -> None:
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        status = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    finally:
        os.chdir(cwd)
    report = capsys.readouterr().out
    assert status == EXIT_STATUS_SUCCESS, report
    assert "0 broken" in report


# ---------------------------------------------------------------- import cycles


def cycles(graph: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan): each one a cycle or
    several cycles knotted together."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for module in sorted(graph):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_cycles_finds_a_loop_and_only_a_loop() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_specmon(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(SRC))
    graph = grimp.build_graph("specmon", cache_dir=None)
    imports = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    found = cycles(imports)
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


# ---------------------------------------------------------------- the tests' own layout


SHARED = ("support", "real_vllm")
"""The folders of tests/ whose modules may be imported from other folders and from benchmarks/:
the shared helpers and the real-vLLM harness."""


def _tests_module(name: str, importer: Path, tests: Path) -> tuple[Path, bool] | None:
    """The file under `tests` that the absolute module `name`, imported from `importer`, is, and
    whether it was named by a bare name (a file beside the importer, which pytest puts on
    sys.path): `tests.x.y` or a bare name; None for anything else (specmon, libraries)."""
    parts = name.split(".")
    bare = parts[0] != tests.name
    base = importer.parent.joinpath(*parts) if bare else tests.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file() and candidate.resolve().is_relative_to(tests.resolve()):
            return candidate, bare
    return None


def layout_problems(path: Path, source: str, tests: Path = TESTS) -> list[str]:
    """Imports in `path` (its `source`: a module under `tests`, or one beside it such as a
    benchmark) that break the tests' layout: from a `test_*` module or a conftest, of an
    underscore name of another tests module, of a helper of another folder that is not shared
    (SHARED), or of a tests module by a bare name."""
    problems = []
    root = tests.parent
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            targets = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve from the importer's package
                package = path.parent
                for _ in range(node.level - 1):
                    package = package.parent
                rel = package.relative_to(root).parts
                module = ".".join((*rel, *((node.module or "").split(".") if node.module else ())))
            else:
                module = node.module or ""
            targets = [(module, [a.name for a in node.names])]
        else:
            continue
        for module, names in targets:
            found = _tests_module(module, path, tests)
            if found is None or found[0].resolve() == path.resolve():
                continue
            target, bare = found
            where = f"{path.relative_to(root)}:{node.lineno}"
            if target.stem.startswith("test_"):
                problems.append(f"{where}: imports from the test module {module}")
            elif target.stem == "conftest":
                problems.append(f"{where}: imports from the conftest {module}")
            elif target.parent != path.parent and target.relative_to(tests).parts[0] not in SHARED:
                problems.append(f"{where}: imports {module}, a helper of another folder")
            if bare:
                problems.append(f"{where}: imports {module} by a bare name")
            private = [n for n in names or () if n.startswith("_")]
            if private:
                problems.append(f"{where}: imports private {', '.join(private)} from {module}")
    return problems


def test_layout_check_finds_what_it_must(tmp_path) -> None:
    tests = tmp_path / "tests"
    for folder in ("ui", "support", "unit", "real_vllm"):
        (tests / folder).mkdir(parents=True)
    (tmp_path / "benchmarks").mkdir()
    for name in (
        "ui/test_a.py", "ui/helpers.py", "ui/conftest.py", "ui/__init__.py", "support/waiting.py",
        "unit/feed.py", "real_vllm/server.py",
    ):  # fmt: skip
        (tests / name).write_text("")
    importer = tests / "ui" / "test_b.py"
    source = (
        "from tests.ui.test_a import SIZE\n"  # a test module
        "import tests.ui.test_a\n"
        "from tests.ui.helpers import _private, public\n"  # a private name
        "from helpers import _bare\n"  # a bare name of a file beside the test, and private
        "from .test_a import thing\n"  # relative
        "from tests.ui.conftest import fixture_maker\n"  # a conftest
        "from tests.unit.feed import events\n"  # another folder's helper
        "from tests.ui.helpers import public\n"  # fine: a helper beside the test
        "from tests.support.waiting import wait_for\n"  # fine: shared
        "from tests.real_vllm.server import start\n"  # fine: the real-vLLM harness
        "from specmon.core import _internal\n"  # not a tests module: not this check's business
        "from __future__ import annotations\n"
    )
    found = layout_problems(importer, source, tests)
    assert [p.split(": ", 1)[1] for p in found] == [
        "imports from the test module tests.ui.test_a",
        "imports from the test module tests.ui.test_a",
        "imports private _private from tests.ui.helpers",
        "imports helpers by a bare name",
        "imports private _bare from helpers",
        "imports from the test module tests.ui.test_a",
        "imports from the conftest tests.ui.conftest",
        "imports tests.unit.feed, a helper of another folder",
    ]
    assert found[0].startswith("tests/ui/test_b.py:1: ")
    benchmark = tmp_path / "benchmarks" / "b.py"
    source = "from tests.unit.feed import events\nfrom tests.support.waiting import wait_for\n"
    assert [p.split(": ", 1)[1] for p in layout_problems(benchmark, source, tests)] == [
        "imports tests.unit.feed, a helper of another folder"
    ]


@pytest.mark.slow
def test_no_test_module_imports_from_another_or_its_private_names() -> None:
    paths = sorted([*TESTS.rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")])
    problems = [problem for path in paths for problem in layout_problems(path, path.read_text())]
    assert problems == [], "move shared helpers to tests/support/:\n" + "\n".join(problems)


# ---------------------------------------------------------------- keys


def _calls_and_literals(tree: ast.AST) -> tuple[set[str], bool]:
    """The names called in `tree`, and whether it spells the string "Authorization"."""
    called = {
        n.func.id if isinstance(n.func, ast.Name) else n.func.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)
    }
    spelled = any(
        isinstance(n, ast.Constant) and n.value == "Authorization" for n in ast.walk(tree)
    )
    return called, spelled


def test_a_key_becomes_a_header_in_two_places_and_is_resolved_at_the_command_line() -> None:
    """`KeyScope` (core/credentials.py) is the one place an API key becomes an `Authorization`
    header, the Prometheus fleet's bearer token file (runtime/fleet_run.py) the only other; the
    environment's key is read by the command line only (docs/architecture.md)."""
    headers: list[str] = []
    resolvers: list[str] = []
    for path in sorted((SRC / "specmon").rglob("*.py")):
        name = path.relative_to(SRC / "specmon").as_posix()
        called, spelled = _calls_and_literals(ast.parse(path.read_text()))
        if spelled:
            headers.append(name)
        if "resolve_api_key" in called:
            resolvers.append(name)
    assert headers == ["core/credentials.py", "runtime/fleet_run.py"]
    assert resolvers and all(name.startswith("cli/") for name in resolvers), resolvers
