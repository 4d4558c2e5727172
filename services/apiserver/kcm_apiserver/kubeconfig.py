"""Writing the kubeconfig that points kubectl and clients at the embedded server (and, for
`kcm dev --apiserver=upstream`, at kube-apiserver with a client certificate or a token file)."""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from pathlib import Path

import yaml


def write(
    path: Path, server_url: str, token: str | None, ca: bytes = b"", user: Mapping[str, str] | None = None
) -> None:
    """`ca`: the PEM CA certificate that signed an https server's certificate; `user`: the
    kubeconfig user's fields (`client-certificate-data`, `tokenFile`, ...) instead of `token`."""
    user = dict(user) if user is not None else ({"token": token} if token else {})
    cluster: dict[str, str] = {"server": server_url}
    if ca:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kcm", "cluster": cluster}],
        "users": [{"name": "kcm-admin", "user": user}],
        "contexts": [
            {"name": "kcm", "context": {"cluster": "kcm", "user": "kcm-admin", "namespace": "default"}}
        ],
        "current-context": "kcm",
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written to a temporary name and renamed, so a reader never sees half a file: the
    # file appearing is how scripts know the server is ready.
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    os.replace(tmp, path)
