"""The deprecated flat import paths of kcm_shared (`kcm_shared._moved`): each resolves to the
module it became, warns, and nothing in the repository still uses one."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

from kcm_shared import _moved

ROOT = pathlib.Path(__file__).resolve().parents[3]


PROBE = """
import importlib, sys, warnings
from kcm_shared import _moved
wrong = []
for old, targets in sorted(_moved.MOVED.items()):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = importlib.import_module("kcm_shared." + old)
    if not any(w.category is DeprecationWarning and targets[0] in str(w.message) for w in caught):
        wrong.append(f"{old}: no DeprecationWarning naming {targets[0]}")
    news = [importlib.import_module(t) for t in targets]
    if len(news) == 1 and mod is not news[0]:
        wrong.append(f"{old}: {mod!r} is not {news[0]!r}")
    for new in news if len(news) > 1 else ():
        missing = [n for n, v in vars(new).items() if not n.startswith("__") and getattr(mod, n, None) is not v]
        if missing:
            wrong.append(f"{old}: lacks {missing} of {new.__name__}")
print("\\n".join(wrong))
sys.exit(1 if wrong else 0)
"""


def test_every_old_path_is_the_new_module_with_a_warning() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_submodule_of_a_moved_package_is_not_loaded_twice() -> None:
    probe = """
import warnings
warnings.simplefilter("ignore")
from kcm_shared.quota import evaluators as old
from kcm_shared.apis.quota import evaluators as new
assert old is new
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def _imports(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_nothing_in_the_repository_imports_an_old_path() -> None:
    offenders = []
    for top in ("shared", "services", "bench", "tools", "tests"):
        for path in (ROOT / top).rglob("*.py"):
            if path.name == "test_moved.py":
                continue
            for name in _imports(ast.parse(path.read_text())):
                if _moved.new_names(name) is not None:
                    offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []
