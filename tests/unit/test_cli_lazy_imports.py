"""`specmon --help` registers every subcommand without importing the heavy libraries: they are
imported inside each command's `run` (docs/benchmarks.md, "CLI startup": `specmon --help`
within 0.2 s; the time is measured by benchmarks/cli_startup.py, this test checks the behaviour
that makes it possible)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("openai", "httpx", "rich", "textual", "prometheus_client", "pynvml", "asyncio")

REPORT = "print(json.dumps([m for m in HEAVY if m in sys.modules]))\n"


def _loaded_after(body: str) -> list[str]:
    code = f"import contextlib, io, json, sys\nHEAVY = {HEAVY!r}\n{body}{REPORT}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_help_imports_no_heavy_module():
    body = (
        "from specmon.cli.main import SUBCOMMANDS, build_parser\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    build_parser().print_help()\n"
        "assert all(n in out.getvalue() for n in SUBCOMMANDS)\n"
    )
    assert _loaded_after(body) == []


def test_help_of_every_subcommand_imports_no_heavy_module():
    body = (
        "from specmon.cli.main import SUBCOMMANDS, main\n"
        "for name in SUBCOMMANDS:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            main([name, '--help'])\n"
        "        except SystemExit:\n"
        "            pass\n"
    )
    assert _loaded_after(body) == []


def test_the_check_sees_a_heavy_import():
    assert "httpx" in _loaded_after("import httpx\n")
