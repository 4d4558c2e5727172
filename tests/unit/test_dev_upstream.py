"""`kcm dev --apiserver=upstream` and `--reference` before anything runs (kcm_cli.upstream): a
missing build is one line naming `make upstream`; the flags are kubeadm's; the RBAC applied is
k8s/'s, without its workloads, in kcm-system."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from kcm_cli import main, manifests, pki, upstream
from kcm_cli.controllers import BUILTIN
from kcm_shared.base import errors

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_build_is_one_line_naming_make_upstream(tmp_path: Path) -> None:
    stale = tmp_path / "build.py"
    stale.write_text("import sys; sys.exit(1)\n")
    with pytest.raises(errors.ConfigError) as missing:
        upstream.binaries(stale)
    assert "run `make upstream`" in str(missing.value) and "\n" not in str(missing.value)
    with pytest.raises(errors.ConfigError, match="tools/upstream"):
        upstream.binaries(tmp_path / "absent.py")

    found = tmp_path / "found.py"
    found.write_text(f"print({str(tmp_path / 'bin')!r})\n")
    assert upstream.binaries(found) == tmp_path / "bin"


def flags(argv: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("--").split("=", 1) for a in argv[1:])


def test_kube_apiserver_runs_with_kubeadms_authorization_and_admission(tmp_path: Path) -> None:
    identity = pki.ensure(tmp_path / "pki")
    plane = upstream.ControlPlane(tmp_path, identity, tmp_path / "bin", audit_log_path=tmp_path / "audit.log")
    argv = plane.apiserver_argv()
    assert argv[0] == str(tmp_path / "bin" / "kube-apiserver")
    got = flags(argv)
    assert got["authorization-mode"] == "Node,RBAC"
    assert got["enable-admission-plugins"] == "NodeRestriction"
    assert got["service-cluster-ip-range"] == "10.96.0.0/12"
    assert got["service-account-issuer"] == "https://kubernetes.default.svc.cluster.local"
    assert (got["service-account-key-file"], got["service-account-signing-key-file"]) == (
        str(identity.sa_pub),
        str(identity.sa_key),
    )
    assert got["client-ca-file"] == str(identity.ca_cert)
    assert got["requestheader-allowed-names"] == "front-proxy-client"
    assert got["bind-address"] == "127.0.0.1" and got["secure-port"] == str(plane.port)
    assert Path(got["audit-policy-file"]).read_text() == upstream.AUDIT_POLICY
    assert flags(plane.etcd_argv())["data-dir"] == str(tmp_path / "etcd")
    # The simulator's kubelet server: reached at its InternalDNS address, with a client certificate.
    assert got["kubelet-preferred-address-types"].startswith("InternalDNS,")
    kubelet_cert = x509.load_pem_x509_certificate(Path(got["kubelet-client-certificate"]).read_bytes())
    assert kubelet_cert.subject.rfc4514_string() == "CN=kube-apiserver-kubelet-client"
    assert Path(got["kubelet-client-key"]).exists()


def test_kubeconfig_tls_names_the_server_and_its_ca_and_no_credentials(tmp_path: Path) -> None:
    """What kubectl adds `--token` to: with the admin's certificate in it, kube-apiserver would
    authenticate the certificate and never look at the token."""
    identity = pki.ensure(tmp_path / "pki")
    plane = upstream.ControlPlane(tmp_path, identity, tmp_path / "bin")
    plane.write_credential_free_kubeconfig(tmp_path / "kubeconfig-tls")
    config = yaml.safe_load((tmp_path / "kubeconfig-tls").read_text())
    (cluster,) = config["clusters"]
    assert cluster["cluster"]["server"] == plane.url
    ca = base64.b64decode(cluster["cluster"]["certificate-authority-data"])
    assert ca == identity.ca_cert.read_bytes()
    assert all(not user["user"] for user in config["users"])


def test_the_reference_runs_with_kubeadms_flags_and_the_users_last(tmp_path: Path) -> None:
    identity = pki.ensure(tmp_path / "pki")
    kubeconfig = tmp_path / "kcm.conf"
    argv = upstream.reference_argv(
        tmp_path / "bin", tmp_path, identity, kubeconfig, 10257, ["--kube-api-qps=100"]
    )
    got = flags(argv)
    assert got["controllers"] == "*,bootstrapsigner,tokencleaner"
    assert got["use-service-account-credentials"] == "true"
    assert got["leader-elect"] == "true" and got["cluster-name"] == "kubernetes"
    assert (got["allocate-node-cidrs"], got["cluster-cidr"]) == ("true", "10.244.0.0/16")
    for key in ("kubeconfig", "authentication-kubeconfig", "authorization-kubeconfig"):
        assert got[key] == str(kubeconfig)
    assert got["service-account-private-key-file"] == str(identity.sa_key)
    assert argv[-1] == "--kube-api-qps=100"


def test_rbac_is_k8s_roles_in_kcm_system_without_workloads() -> None:
    objects = manifests.rbac(ROOT, BUILTIN)
    kinds = {o["kind"] for o in objects}
    assert kinds == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    accounts = {o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"}
    assert {"kcm-watcher", "kcm-coordinator", "deployment-controller", "replicaset-controller"} <= accounts
    assert len(accounts) == len(BUILTIN) + 2
    namespaced = [o for o in objects if o["kind"] in ("ServiceAccount", "Role", "RoleBinding")]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"kcm-system"}

    role, binding = manifests.service_account_credentials(upstream.CONTROLLERS_USER)
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "create"]},
        {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
    ]
    # A RoleBinding, not a ClusterRoleBinding: kcm-system only.
    assert (binding["kind"], binding["metadata"]["namespace"]) == ("RoleBinding", "kcm-system")
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "kcm:controllers"}
    ]


def test_kcm_dev_refuses_kcm_only_flags_with_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main.main(["dev", "--reference", "--replicas", "deployment=2"])
    assert "--reference does not run" in capsys.readouterr().err
