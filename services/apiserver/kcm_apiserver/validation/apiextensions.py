"""Validation of CustomResourceDefinitions, after upstream's apiextensions validation: only
the rule serving them relies on, that a CRD is named `<spec.names.plural>.<spec.group>`.

Called by the dispatch in `validation/__init__.py`.
"""

from __future__ import annotations

from .fielderrors import Causes, Obj, as_dict


def validate_custom_resource_definition(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    expected = f"{as_dict(spec.get('names')).get('plural', '')}.{spec.get('group', '')}"
    name = as_dict(obj.get("metadata")).get("name")
    if name and name != expected:
        c.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group')
