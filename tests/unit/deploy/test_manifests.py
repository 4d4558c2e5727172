"""`kcm manifests`: the committed k8s/ and compose entries are what the controllers' folders say.

A controller's deployment comes from its folder's deploy.yaml (kcm_cli.manifests); these tests
fail when someone edits a generated file by hand, adds a controller without running
`make manifests`, or leaves a removed controller's manifest behind.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml
from kcm_cli import manifests
from kcm_cli.controllers import BUILTIN

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A copy of what `kcm manifests` reads and writes."""
    shutil.copytree(REPO / "k8s", tmp_path / "k8s")
    shutil.copy(REPO / "docker-compose.yml", tmp_path / "docker-compose.yml")
    return tmp_path


def test_the_committed_manifests_are_up_to_date() -> None:
    assert manifests.stale(REPO, BUILTIN) == []


def test_a_hand_edit_and_a_stray_manifest_are_found(root: Path) -> None:
    edited = root / "k8s/base/controllers" / f"{BUILTIN[0].alias}.yaml"
    edited.write_text(edited.read_text().replace("replicas:", "replicas: 9 #"))
    stray = root / "k8s/base/controllers/gone.yaml"
    stray.write_text("{}\n")
    assert sorted(manifests.stale(root, BUILTIN)) == sorted([edited, stray])


def test_every_controller_gets_its_rules_manifest_and_service(root: Path) -> None:
    written = manifests.render(root, BUILTIN)
    compose = yaml.safe_load(written[root / "docker-compose.yml"])
    kustomization = yaml.safe_load(written[root / "k8s/base/kustomization.yaml"])
    for spec in BUILTIN:
        deploy = manifests.load(spec)
        docs = list(yaml.safe_load_all(written[root / "k8s/base/controllers" / f"{spec.alias}.yaml"]))
        role = next(d for d in docs if d["kind"] == "ClusterRole")
        assert role["rules"] == yaml.safe_load(f"rules:\n{deploy.rules}")["rules"]
        assert compose["services"][spec.alias]["deploy"]["replicas"] == deploy.replicas
        assert f"controllers/{spec.alias}.yaml" in kustomization["resources"]


def test_a_file_without_the_markers_is_refused(root: Path) -> None:
    compose = root / "docker-compose.yml"
    compose.write_text(compose.read_text().replace(manifests.BEGIN, "# gone"))
    with pytest.raises(ValueError, match="markers are missing"):
        manifests.render(root, BUILTIN)


def test_a_spec_without_its_package_is_refused() -> None:
    plugin = dataclasses.replace(BUILTIN[0], name="plugin-controller", package="")
    with pytest.raises(ValueError, match="plugin-controller: its Spec names no package"):
        manifests.load(plugin)
