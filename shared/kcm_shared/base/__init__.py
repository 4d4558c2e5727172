"""Layer 1, the base: errors, structured logs, traces, cancellation, fan-out and GC settings.

Imports nothing else of kcm_shared; every other layer may import it.
"""
