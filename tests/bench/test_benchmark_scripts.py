"""The benchmark scripts keep up with the code they measure (docs/benchmarks.md): every name they
import from specmon exists, and the chat benchmark opens the chat's session as the chat does."""

from __future__ import annotations

import ast
import importlib
import os
from pathlib import Path

import pytest
from benchmarks import chat_render

from specmon.runtime.monitor import Target
from specmon.runtime.session import LiveSession, open_session

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def specmon_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every specmon import in a script, at any depth (many scripts
    import inside functions); name None for `import specmon.x`."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specmon"):
            assert node.module is not None
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, None) for a in node.names if a.name.startswith("specmon")
            ]
    return found


def unresolved(module: str, name: str | None) -> str | None:
    try:
        imported = importlib.import_module(module)
    except ImportError as exc:
        return f"{module}: {exc}"
    if name is None or hasattr(imported, name):
        return None
    try:
        importlib.import_module(f"{module}.{name}")
    except ImportError:
        return f"{module} has no {name}"
    return None


SCRIPTS = sorted(BENCHMARKS.rglob("*.py"))


def test_the_scripts_are_found() -> None:
    names = {p.name for p in SCRIPTS}
    assert {"chat_render.py", "arrival_skew.py", "make_verdict_corpus.py", "chat_lag.py"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(BENCHMARKS)))
def test_every_specmon_import_of_a_benchmark_resolves(script: Path) -> None:
    missing = [
        f"line {line}: {why}"
        for line, module, name in specmon_imports(script)
        if (why := unresolved(module, name)) is not None
    ]
    assert not missing, f"{script.name}: " + "; ".join(missing)


def test_the_chat_benchmark_opens_the_session_the_chat_opens() -> None:
    """The chat's port takes a factory of a LiveSession: the benchmark gives it what
    `specmon chat --attach` gets from open_session (not started here)."""
    session = chat_render.chat_session("http://127.0.0.1:9")()
    expected = open_session(chat_render.SessionConfig(targets=(Target("http://127.0.0.1:9"),)))
    assert type(session) is type(expected)
    assert session.config.targets == (Target("http://127.0.0.1:9"),)
    assert session.config.quiet  # a full-screen app owns the terminal
    protocol = {n for n in vars(LiveSession) if not n.startswith("_")}
    assert protocol and all(hasattr(session, n) for n in protocol)


def test_another_process_cpu_is_read_and_an_unknown_one_is_zero() -> None:
    for _ in range(200_000):  # some CPU time of our own to read back
        pass
    assert chat_render.process_cpu_s(os.getpid()) > 0
    assert chat_render.process_cpu_s(None) == 0.0
    assert chat_render.process_cpu_s(2**22 + 12345) == 0.0  # above Linux's largest pid
