"""`kcm kube-identities`' files: each service's kubeconfig names the admin's cluster (server
replaced by --master, CA kept) and a user whose token is the file beside it."""

from __future__ import annotations

from pathlib import Path

import yaml
from kcm_cli import kubeidentities

ADMIN = """
apiVersion: v1
kind: Config
clusters:
- {name: other, cluster: {server: https://elsewhere:6443}}
- {name: k3s, cluster: {server: https://127.0.0.1:6443, certificate-authority-data: Q0E=}}
users:
- {name: admin, user: {token: secret}}
contexts:
- {name: default, context: {cluster: k3s, user: admin}}
current-context: default
"""


def test_the_cluster_is_the_admins_current_one_with_master_as_its_server(tmp_path: Path) -> None:
    admin = tmp_path / "kubeconfig"
    admin.write_text(ADMIN)
    cluster = kubeidentities.cluster_entry(admin, "https://k3s:6443")
    assert cluster == {"server": "https://k3s:6443", "certificate-authority-data": "Q0E="}
    assert kubeidentities.cluster_entry(admin, None)["server"] == "https://127.0.0.1:6443"


def test_a_service_kubeconfig_carries_no_credential_but_its_token_file() -> None:
    config = yaml.safe_load(kubeidentities.kubeconfig({"server": "https://k3s:6443"}, "job"))
    (user,) = config["users"]
    assert user == {"name": "job", "user": {"tokenFile": kubeidentities.TOKEN}}
    assert config["current-context"] == "job"
    assert config["contexts"][0]["context"] == {"cluster": "kcm", "user": "job"}
    assert "secret" not in str(config)
