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

from kcm_shared.reconcile import NotOwner, Reconcile, Result, TerminalError
from kcm_shared.runtime.spec import Context, FlagSet, Spec

__all__ = ["Context", "FlagSet", "NotOwner", "Reconcile", "Result", "Spec", "TerminalError"]
