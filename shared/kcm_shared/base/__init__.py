"""Layer 1, the base: errors, structured logs, traces, cancellation, fan-out, GC settings and Go's %q
(`goquote`).

Imports nothing else of kcm_shared; every other layer may import it.
"""
