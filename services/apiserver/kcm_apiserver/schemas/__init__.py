"""Schemas of every served kind: OpenAPI documents, patch type information, unknown fields.

- `openapi_v3`: the /openapi/v3 documents; `server` serves them, `openapi_v2` rewrites them.
- `patchtypes`: a kind's `TypeInfo`, which `operations` hands to the patch and apply engines.
- `unknownfields`: the fields a kind's schema lacks, for `operations`' fieldValidation.
- `clientmodels` and `crd`: where those come from: the official Python client's models for
  built-in kinds, the CRD's `openAPIV3Schema` for custom resources.
"""
