"""The simulated kubelet's image rules: reference parsing as distribution/reference does it, the
missing-image rule and the texts of its Events."""

from __future__ import annotations

import pytest
from kcm_simulator import images


@pytest.mark.parametrize(
    ("image", "full"),
    [
        ("nginx", "docker.io/library/nginx:latest"),
        ("nginx:1.14.2", "docker.io/library/nginx:1.14.2"),
        ("bitnami/redis:7", "docker.io/bitnami/redis:7"),
        ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
        ("localhost/app", "localhost/app:latest"),
        ("localhost:5000/team/app:v1", "localhost:5000/team/app:v1"),
        ("busybox@sha256:" + "a" * 64, "docker.io/library/busybox@sha256:" + "a" * 64),
    ],
)
def test_references_are_normalized_as_containerd_names_them(image: str, full: str) -> None:
    assert images.parse(image).full == full


@pytest.mark.parametrize(
    ("image", "error"),
    [
        ("", "repository name must have at least one component"),
        ("Nginx", "invalid reference format: repository name (library/Nginx) must be lowercase"),
        (
            "Team/App:V1",
            "invalid reference format: repository name (App) must be lowercase",
        ),  # "Team" is a host
        ("Registry.example/app:V1", None),
        ("nginx:", "invalid reference format"),
        ("nginx::1", "invalid reference format"),
        ("-nginx", "invalid reference format"),
        ("nginx:" + "x" * 129, "invalid reference format"),
        ("a" * 64, f"invalid repository name ({'a' * 64}), cannot specify 64-byte hexadecimal strings"),
        ("x/" + "a" * 260, "repository name must not be more than 255 characters"),
    ],
)
def test_invalid_references_fail_with_the_library_error(image: str, error: str | None) -> None:
    if error is None:  # a host's case is free, a tag's too
        images.parse(image)
        return
    with pytest.raises(images.InvalidImage) as raised:
        images.parse(image)
    assert str(raised.value) == error


def test_inspect_failure_is_the_image_managers_message() -> None:
    with pytest.raises(images.InvalidImage) as raised:
        images.parse("Nginx")
    assert images.inspect_failure("Nginx", raised.value) == (
        'Failed to apply default image tag "Nginx": couldn\'t parse image name "Nginx": '
        "invalid reference format: repository name (library/Nginx) must be lowercase"
    )


@pytest.mark.parametrize(
    "image",
    [
        "nginx:404",
        "nginx:doesnotexist",
        "app:v1-does-not-exist",
        "busybox:NonExistent",
        "invalid.example/app:v1",
        "registry.invalid:5000/app",
        "nginx:1.161",
        "nginx:sometag",
        "gcr.io/google-samples/kubernetes-bootcamp:v10",
    ],
)
def test_the_documented_missing_images_cannot_be_pulled(image: str) -> None:
    assert images.pull_error(images.parse(image)) is not None


@pytest.mark.parametrize(
    "image", ["nginx", "nginx:1.16.1", "docker.io/library/nginx:1.14.2", "example.com/404:v1"]
)
def test_other_images_pull(image: str) -> None:
    assert images.pull_error(images.parse(image)) is None


def test_pull_errors_are_containerds_texts() -> None:
    assert images.pull_error(images.parse("nginx:1.161")) == (
        'rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/nginx:1.161": '
        'failed to resolve reference "docker.io/library/nginx:1.161": docker.io/library/nginx:1.161: not found'
    )
    error = images.pull_error(images.parse("invalid.example/team/app:v1"))
    assert error is not None
    assert error.endswith(
        'Head "https://invalid.example/v2/team/app/manifests/v1": dial tcp: lookup invalid.example: no such host'
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.0004, "0s"),
        (0.5123, "512ms"),
        (1.5, "1.5s"),
        (2, "2s"),
        (61.25, "1m1.25s"),
        (120, "2m0s"),
    ],
)
def test_go_duration(seconds: float, text: str) -> None:
    assert images.go_duration(seconds) == text


def test_pull_policy_defaults_as_the_api_does() -> None:
    assert images.pulls_always({}, images.parse("nginx"))
    assert not images.pulls_always({}, images.parse("nginx:1.27"))
    assert not images.pulls_always({"imagePullPolicy": "IfNotPresent"}, images.parse("nginx"))
    assert images.pulls_always({"imagePullPolicy": "Always"}, images.parse("nginx:1.27"))


def test_sizes_are_stable() -> None:
    ref = images.parse("nginx:1.27")
    assert images.size_bytes(ref) == images.size_bytes(images.parse("docker.io/library/nginx:1.27"))
    assert 10_000_000 <= images.size_bytes(ref) < 200_000_000
