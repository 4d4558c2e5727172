"""Layer 8, the controller runtime: what a controller author builds on.

A controller is a `Spec` whose `build(ctx: Context)` registers event handlers on the caches in
`ctx.caches` and returns its reconcile function; the `Manager` (`runtime.manager`) runs Specs
with caches fed from the bus, the durable work queue, partition ownership and Events, none of
which a controller touches directly. With `kcm_shared.controllerutil` (upstream's
controller_utils) and `kcm_shared.testing` (fakes for tests) this is all a controller needs.

The names below are the public face; the modules behind them: `spec` (Spec, Context),
`kcm_shared.reconcile` (Reconcile and its outcomes: Result, TerminalError, NotOwner, with the
table of what each leads to), `delaying` (`Context.enqueue_after` and the `Clock` it waits on),
`cache` (the informer), `events` (the Event recorder), `controllerflags` (the command line, with
`pflag` for Go's flag syntax and `upstreamflags` for upstream's flags and controllers),
`deployfile` (the controller's deploy.yaml: its ServiceAccount), `manager` (what runs it all).
"""

from typing import TYPE_CHECKING

from kcm_shared.reconcile import NotOwner, Reconcile, Result, TerminalError

if TYPE_CHECKING:
    from kcm_shared.runtime.spec import Context, FlagSet, Spec

__all__ = ["Context", "FlagSet", "NotOwner", "Reconcile", "Result", "Spec", "TerminalError"]


# `spec` on first use, not at import: it brings the informer, and with it NATS and the bus, to
# every process that imports any module of this package, such as the simulator (for `events`)
# or every `kcm` command (for `pflag`), which build no controller. Out of mypy's sight, which
# reads the imports above, so a misspelt name stays an error.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        if name in ("Context", "FlagSet", "Spec"):
            from kcm_shared.runtime import spec

            return getattr(spec, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
