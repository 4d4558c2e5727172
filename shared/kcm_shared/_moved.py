"""Deprecated import paths: the flat modules of kcm_shared before it was layered.

Plugins (`kcm controller --plugin`) written against `kcm_shared.controller`,
`kcm_shared.cache`, `kcm_shared.podcontrol` and the rest keep importing: an old name resolves
to the module it became (the same module object, so its state is not duplicated), with a
DeprecationWarning naming the new path. `kcm_shared.controller`, which was split in three,
resolves to a module holding the public names of all three (and of `kcm_shared.reconcile`,
where its `Reconcile` went). Nothing in this repository imports an old path (an import-linter
contract cannot see these, so `tests/unit/shared/test_moved.py` checks every entry instead).
Installed by `kcm_shared/__init__.py`; to be removed once plugins had a release to move.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence

_LAYERS = {
    "base": ("errors", "logs", "tracing", "cancellation", "fanout", "gcpolicy"),
    "apimachinery": ("codec", "selectors", "quantity", "resourceversion", "intstr", "goduration", "apitypes"),
    "apis": ("cron", "quota", "nodeaffinity", "satoken"),
    "client": ("http1", "tokenbucket", "kubeclient", "discovery", "scale"),
    "bus": (
        "natsconn",
        "subjects",
        "membership",
        "fencing",
        "leaderelection",
        "health",
        "healthbeat",
        "opsserver",
        "flags",
    ),
    # `addafter` is gone, not moved: its AddAfter became `Context.enqueue_after`.
    "runtime": ("cache", "events"),
    "controllerutil": (
        "podcontrol",
        "controllerref",
        "expectations",
        "podranking",
        "history",
        "ownwrites",
        "identityflags",
        "serviceaccounts",
    ),
    "controllerutil.replicaset": ("replicamanager", "replicastatus"),
    "controllerutil.endpoints": ("endpointutil", "endpointslicetracker"),
}

# old module (under kcm_shared) -> the module(s) it became
MOVED: dict[str, tuple[str, ...]] = {
    old: (f"kcm_shared.{layer}.{old}",) for layer, olds in _LAYERS.items() for old in olds
}
MOVED["controller"] = (
    "kcm_shared.runtime.spec",
    "kcm_shared.runtime.controllerflags",
    "kcm_shared.runtime.manager",
    "kcm_shared.reconcile",  # `controller.Reconcile`, which spec defined until issue 26
)


def new_names(fullname: str) -> tuple[str, ...] | None:
    """The module(s) an old `kcm_shared.<old>[.<sub>]` path became, or None if it did not move."""
    prefix, _, rest = fullname.partition(".")
    if prefix != "kcm_shared" or not rest:
        return None
    head, _, sub = rest.partition(".")
    targets = MOVED.get(head)
    if targets is None:
        return None
    return tuple(f"{target}.{sub}" for target in targets) if sub else targets


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if new_names(fullname) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        targets = new_names(spec.name) or ()
        warnings.warn(
            f"{spec.name} is deprecated; import {' / '.join(targets)}", DeprecationWarning, stacklevel=3
        )
        modules = [importlib.import_module(name) for name in targets]
        if len(modules) == 1:
            return modules[0]
        merged = types.ModuleType(spec.name, modules[0].__doc__)
        for module in modules:
            merged.__dict__.update(
                (name, value) for name, value in vars(module).items() if not name.startswith("__")
            )
        return merged

    def exec_module(self, module: types.ModuleType) -> None:
        pass  # the module it resolves to is already executed


def install() -> None:
    """Put the finder first, before the path finder, so an old name never loads a second copy."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
