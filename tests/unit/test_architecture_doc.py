"""docs/architecture.md draws every module that exists: each module under src/specmon is named
there (its file name, e.g. `numbers.py`), so a reader of the doc finds every file of the tree."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_is_named_in_the_architecture_doc() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    package = ROOT / "src" / "specmon"
    unnamed = [
        path.relative_to(package).as_posix()
        for path in sorted(package.rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py") and path.name not in doc
    ]
    assert unnamed == [], f"modules docs/architecture.md does not name: {unnamed}"
