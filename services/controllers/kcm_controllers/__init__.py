"""Every built-in controller, one subpackage (one folder) each.

A controller's subpackage holds its whole behaviour and exports its `SPEC`
(`kcm_shared.runtime.Spec`); the launcher's registry (`kcm_cli.controllers`) names it
in one line. Subpackages import `kcm_shared` and never one another (`make lint` checks it).
"""
