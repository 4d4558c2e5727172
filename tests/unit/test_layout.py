"""The test tree's own rules: unit tests mirror the code in packages (same-named files in two
folders must not clash), and no test module imports another: what two of them share lives in
the testing kit (kcm_shared.testing), tests/support/ or an e2e support module."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _imported(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_test_module_imports_another() -> None:
    modules = list(TESTS.rglob("*.py"))
    assert len(modules) > 100
    offenders = [
        f"{path.relative_to(TESTS)}: {name}"
        for path in modules
        for name in _imported(path)
        if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert offenders == []


def test_every_unit_test_folder_is_a_package() -> None:
    folders = {path.parent for path in (TESTS / "unit").rglob("test_*.py")}
    assert len(folders) > 20
    assert sorted(str(f.relative_to(TESTS)) for f in folders if not (f / "__init__.py").exists()) == []
