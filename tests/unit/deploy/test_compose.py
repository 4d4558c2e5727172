"""docker-compose.yml and its .env, checked without a Docker engine.

The file is interpolated from .env the way `docker compose` does it, validated against the
Compose specification's JSON schema (tests/data/compose-spec.json, see tests/data/README.md),
and cross-checked with the code: every kcm service's command parses with `kcm`'s own parser,
health checks ask the port and path the service serves, every builtin controller is its own
service with a replica count, and the services find NATS and the Kubernetes API where the
stack puts them. NATS is locked down: the server's config (shared with k8s/) includes the
authorization `kcm nats-auth` generates, every NATS client connects with its own identity's
seed, from a volume no other service mounts, the apiserver's token is generated too, and
ports are published on loopback only. The API is locked down the same way: every kcm service
reads a kubeconfig of its own ServiceAccount (`kcm kube-identities`), from a volume no other
service mounts, and only the API servers, the simulator and kube-identities see the admin's.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml
from kcm_cli import controllers, kubeidentities, main, manifests, natsauth
from kcm_shared.base import tracing
from kcm_shared.runtime import controllerflags

REPO = Path(__file__).resolve().parents[3]
SCHEMA = REPO / "tests" / "data" / "compose-spec.json"
_VARIABLE = re.compile(r"\$(?:\$|\{(\w+)(?::?-([^}]*))?\})")

Obj = dict[str, Any]


def dotenv() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (REPO / ".env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f".env line without '=': {line!r}"
            out[key.strip()] = value.strip()
    return out


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's `${VAR}`, `${VAR:-default}` and `$$`; a variable neither set nor defaulted fails."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group(1), m.group(2)
        if name in env:
            return env[name]
        assert default is not None, f"${{{name}}} is used but not set in .env"
        return default

    return _VARIABLE.sub(one, value)


@functools.cache
def raw() -> Obj:
    doc: Obj = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return doc


@functools.cache
def compose() -> Obj:
    doc: Obj = interpolate(raw(), dotenv())
    return doc


def services() -> dict[str, Obj]:
    out: dict[str, Obj] = compose()["services"]
    return out


def kcm_services() -> dict[str, Obj]:
    """Services running the kcm image (entrypoint `kcm`, so `command` is the kcm argument list)."""
    return {name: s for name, s in services().items() if s["image"] == dotenv()["KCM_IMAGE"]}


def kcm_args(service: Obj) -> Any:
    return main.parse(service["command"])[0]


def mounts(service: Obj) -> dict[str, str]:
    """Container path -> volume name or host path."""
    return {v.split(":")[1]: v.split(":")[0] for v in service.get("volumes", [])}


def nats_config() -> tuple[Path, dict[str, str]]:
    """Where the nats service reads its config, and the config's `key: value` lines."""
    nats = services()["nats"]
    command = nats["command"]
    path = command[command.index("--config") + 1]
    source = mounts(nats)[path]
    assert source.startswith("./"), "the config is a file of this repository"
    text = (REPO / source).read_text()
    return Path(path), dict(re.findall(r"^(\w+)\s*[:=]?\s*(.+?)\s*$", text, re.MULTILINE))


def health_url(service: Obj) -> str:
    """The URL a `python -c "...urlopen('URL'...)"` health check asks."""
    test = service["healthcheck"]["test"]
    (url,) = re.findall(r"urlopen\('([^']+)'", " ".join(test))
    return str(url)


def validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))


def test_compose_file_is_valid_against_the_compose_spec_schema() -> None:
    errors = sorted(validator().iter_errors(compose()), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


def test_schema_validation_can_fail() -> None:
    broken = {
        **compose(),
        "services": {**services(), "nats": {**services()["nats"], "deploy": {"replicas": "x"}}},
    }
    assert list(validator().iter_errors(broken))
    assert list(validator().iter_errors({**compose(), "servces": {}}))


def test_every_variable_comes_from_the_one_env_file() -> None:
    # interpolate() fails on a variable .env does not set; every .env entry is also used.
    compose()
    text = (REPO / "docker-compose.yml").read_text()
    used = {m.group(1) for m in _VARIABLE.finditer(text) if m.group(1)}
    compose_own = {"COMPOSE_PROJECT_NAME", "COMPOSE_PROFILES"}  # read by docker compose itself
    assert set(dotenv()) - compose_own == used


def test_the_default_profile_and_master_name_the_embedded_apiserver() -> None:
    env = dotenv()
    profiles = {p for s in services().values() for p in s.get("profiles", [])}
    assert profiles == {"embedded", "k3s", "tracing"}
    chosen = env["COMPOSE_PROFILES"].split(",")
    assert set(chosen) == {"embedded", "tracing"}
    master = urlsplit(env["KCM_MASTER"])
    api = services()[master.hostname or ""]
    assert "embedded" in api["profiles"]
    assert kcm_args(api).port == master.port


def test_every_service_sends_its_spans_to_the_trace_viewer_of_the_default_profiles() -> None:
    env = dotenv()
    endpoint = urlsplit(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
    jaeger = services()[endpoint.hostname or ""]
    assert "tracing" in jaeger["profiles"] and "tracing" in env["COMPOSE_PROFILES"].split(",")
    # Jaeger all-in-one takes OTLP/HTTP on 4318 once OTLP is on; the services speak only that.
    assert jaeger["image"].startswith("jaegertracing/all-in-one:")
    assert jaeger["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
    assert (endpoint.scheme, endpoint.port, endpoint.path) == ("http", 4318, "")
    for name, service in kcm_services().items():
        if kcm_args(service).command in ("watcher", "coordinator", "controller"):
            assert (
                service["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == env["OTEL_EXPORTER_OTLP_ENDPOINT"]
            ), name
            assert service["environment"]["OTEL_TRACES_EXPORTER"] == "otlp", name
    # The processors those settings give a service are the OTLP exporter, to that endpoint.
    [processor] = tracing.processors_from_env(
        {k: env[k] for k in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT")}
    )
    processor.shutdown()


def test_the_trace_viewer_ui_is_published_on_loopback_only() -> None:
    jaeger = services()["jaeger"]
    assert jaeger["ports"] == ["127.0.0.1:16686:16686"]


def test_every_kcm_service_runs_a_subcommand_whose_flags_parse() -> None:
    assert kcm_services()
    for name, service in kcm_services().items():
        args = kcm_args(service)  # SystemExit or pflag.FlagError if it would not start
        commands = (
            *("apiserver", "sim", "watcher", "coordinator", "controller", "controllers"),
            *("nats-auth", "kube-identities"),
        )
        assert args.command in commands, name


def test_every_builtin_controller_is_its_own_scaled_service() -> None:
    running: dict[str, str] = {}
    for name, service in kcm_services().items():
        args = kcm_args(service)
        if args.command == "controller":
            (spec,) = controllerflags.select(controllers.BUILTIN, args.name)
            assert spec.name not in running, f"{spec.name} runs in {running.get(spec.name)} and {name}"
            running[spec.name] = name
            assert service["deploy"]["replicas"] >= 1, name
        assert args.command != "controllers", f"{name}: one service per controller"
    assert set(running) == {spec.name for spec in controllers.BUILTIN}


def test_watcher_and_coordinator_run_with_a_standby() -> None:
    commands = {kcm_args(s).command: s for s in kcm_services().values()}
    for name in ("watcher", "coordinator"):
        assert commands[name]["deploy"]["replicas"] >= 2


def test_health_checks_ask_the_port_and_path_each_service_serves() -> None:
    for name, service in kcm_services().items():
        args = kcm_args(service)
        if args.command in ("sim", "nats-auth"):
            continue  # sim shares the apiserver's network namespace; nats-auth is a one-shot
        if args.command == "kube-identities":
            # Healthy once every service's token is there: each directory of --out.
            assert f"os.listdir('{args.out}')" in " ".join(service["healthcheck"]["test"])
            continue
        url = urlsplit(health_url(service))
        if args.command == "apiserver":
            assert (url.port, url.path) == (args.port, "/readyz"), name
        elif args.command == "controller":
            # Upstream's secure port, which the controllers serve instead of the plain ops port.
            assert (url.scheme, url.port, url.path) == ("https", args.secure_port, "/healthz"), name
            assert args.ops_port is None, name
        else:
            assert (url.port, url.path) == (args.ops_port, "/healthz"), name
    nats = services()["nats"]
    url = urlsplit(health_url(nats))
    assert url.port == int(nats_config()[1]["http"].rsplit(":", 1)[1])
    assert url.path == "/healthz" and "js-enabled-only=true" in url.query


def test_nats_keeps_jetstream_on_a_named_volume() -> None:
    _, config = nats_config()
    store = re.search(r"jetstream\s*\{\s*store_dir:\s*(\S+)", (REPO / "k8s/base/nats.conf").read_text())
    assert store is not None
    assert mounts(services()["nats"])[store.group(1)] in compose()["volumes"]
    assert config["max_payload"] == "8MB" and config["max_pending"] == "64MB"


def test_nats_wants_credentials_generated_by_the_one_shot_service() -> None:
    config_path, config = nats_config()
    nats, init = services()["nats"], services()["nats-auth"]
    included = (config_path.parent / config["include"].strip('"')).resolve()
    assert included.name == natsauth.AUTH_CONF
    volume = mounts(nats)[str(included.parent)]
    args = kcm_args(init)
    assert mounts(init)[str(args.out)] == volume
    assert nats["depends_on"]["nats-auth"]["condition"] == "service_completed_successfully"
    assert "restart" not in init  # one shot: it exits when the files are there


def seed_volumes(init: Obj) -> dict[str, str]:
    """Identity -> the volume the one-shot nats-auth service keeps its seed in."""
    seeds = kcm_args(init).seeds
    out = {}
    for path, volume in mounts(init).items():
        if Path(path).parent == seeds:
            out[Path(path).name] = volume
    return out


def test_every_nats_client_connects_as_its_own_identity() -> None:
    init = services()["nats-auth"]
    identities = natsauth.deployment_identities(controllers.BUILTIN)
    volumes = seed_volumes(init)
    assert set(volumes) == set(identities)
    assert len(set(volumes.values())) == len(volumes), "one volume per identity"
    seen = set()
    for name, service in kcm_services().items():
        args = kcm_args(service)
        if getattr(args, "nats_url", None) is None:
            continue
        seed = Path(args.nats_nkey_seed)
        assert seed.name == natsauth.SEED_KEY, name
        assert mounts(service)[str(seed.parent)] == volumes[name], name
        assert args.nats_password is None and args.nats_token is None, name
        seen.add(name)
    assert seen == set(identities) - {"consumer"}  # the consumer's is for your own clients


def kubeconfig_volumes(init: Obj) -> dict[str, str]:
    """Service -> the volume kube-identities writes its kubeconfig and token into."""
    out = kcm_args(init).out
    return {Path(path).name: v for path, v in mounts(init).items() if Path(path).parent == out}


ADMIN_KUBECONFIG = "kube"  # the volume the API service writes the admin kubeconfig into
# Who may hold the admin kubeconfig: the API servers that write it, the simulator (it stands in
# for the kubelets and the scheduler, with their rights) and kube-identities, which uses it to
# give every other service its own ServiceAccount.
ADMINS = {"apiserver", "k3s", "sim", "kube-identities"}


def test_each_service_mounts_its_own_credentials_and_no_other() -> None:
    """A service that is taken over holds one NATS identity and one API identity, its own: no
    other seed, no other service's kubeconfig and not the admin's are in its container."""
    init, kube = services()["nats-auth"], services()["kube-identities"]
    seeds, kubeconfigs = seed_volumes(init), kubeconfig_volumes(kube)
    auth = mounts(init)[str(kcm_args(init).out)]
    credentials = {*seeds.values(), *kubeconfigs.values(), auth, ADMIN_KUBECONFIG}
    for name, service in services().items():
        held = {v for v in mounts(service).values() if v in credentials}
        if name == "nats-auth":
            assert held == {*seeds.values(), auth}, held
        elif name == "kube-identities":
            assert held == {*kubeconfigs.values(), ADMIN_KUBECONFIG}, held
        elif name == "nats":
            # The server reads auth.conf (public keys only) from the nats-auth volume.
            assert held == {auth}, held
        elif name in ADMINS:
            assert held == {ADMIN_KUBECONFIG}, f"{name} mounts {sorted(held)}"
        else:
            own = {seeds.get(name), kubeconfigs.get(name)} - {None}
            assert held <= own, f"{name} mounts {sorted(held - own)}"


def test_every_api_client_but_the_admins_is_its_own_service_account() -> None:
    kube = services()["kube-identities"]
    volumes = kubeconfig_volumes(kube)
    assert volumes == {i: manifests.kube_volume(i) for i in manifests.service_accounts(controllers.BUILTIN)}
    assert len(set(volumes.values())) == len(volumes), "one volume per service"
    seen = set()
    for name, service in kcm_services().items():
        args = kcm_args(service)
        if args.command not in ("watcher", "coordinator", "controller"):
            continue
        kubeconfig = Path(args.kubeconfig)
        assert kubeconfig.name == kubeidentities.KUBECONFIG, name
        assert mounts(service)[str(kubeconfig.parent)] == volumes[name], name
        assert service["depends_on"]["kube-identities"]["condition"] == "service_healthy", name
        seen.add(name)
    assert seen == set(volumes)
    # kube-identities reads k8s/base's RBAC from this repository, as `manifests.rbac` finds it.
    root = kcm_args(kube).root
    assert mounts(kube)[str(root / "k8s/base")] == "./k8s/base"


def test_every_controllers_secure_port_reviews_through_its_own_kubeconfig() -> None:
    """TokenReview and SubjectAccessReview as the controller's own ServiceAccount (its manifest
    binds system:auth-delegator), at the server the containers reach (kube-identities writes it):
    without them the secure port would answer only the always-allowed paths."""
    for name, service in kcm_services().items():
        args = kcm_args(service)
        if args.command != "controller":
            continue
        assert args.authentication_kubeconfig == args.kubeconfig, name
        assert args.authorization_kubeconfig == args.kubeconfig, name


def test_the_apiserver_token_is_generated_not_fixed() -> None:
    api, init = services()["apiserver"], services()["nats-auth"]
    args, init_args = kcm_args(api), kcm_args(init)
    assert args.token is None
    assert mounts(api)[str(args.token_file.parent)] == mounts(init)[str(init_args.apiserver_token.parent)]
    assert args.token_file.name == init_args.apiserver_token.name
    assert api["depends_on"]["nats-auth"]["condition"] == "service_completed_successfully"


def test_services_find_nats_and_the_kubeconfig_where_the_stack_puts_them() -> None:
    writers = {}
    api = services()["apiserver"]
    writers["apiserver"] = kcm_args(api).kubeconfig_out
    k3s = services()["k3s"]["command"]
    writers["k3s"] = Path(k3s[k3s.index("--write-kubeconfig") + 1])
    assert "--disable-controller-manager" in k3s  # kcm replaces it
    assert len(set(writers.values())) == 1
    admin = next(iter(writers.values()))
    for name in writers:
        assert mounts(services()[name])[str(admin.parent)] == ADMIN_KUBECONFIG, name
    for name, service in kcm_services().items():
        args = kcm_args(service)
        if args.command in ("watcher", "coordinator", "controller"):
            assert args.nats_url == "nats://nats:4222", name
            assert args.master == dotenv()["KCM_MASTER"], name
            assert "nats" in service["depends_on"], name
        if args.command in ("sim", "kube-identities"):
            assert Path(args.kubeconfig) == admin, name
            assert mounts(service)[str(admin.parent)] == ADMIN_KUBECONFIG, name
        if args.command == "sim":
            assert service["network_mode"] == "service:apiserver"  # its kubeconfig names 127.0.0.1
        if args.command == "kube-identities":
            assert args.master == dotenv()["KCM_MASTER"], name


@pytest.mark.parametrize("port", ["4222:4222", "6443:6443"])
def test_the_laptop_reaches_nats_and_the_api(port: str) -> None:
    published = {p for s in services().values() for p in s.get("ports", [])}
    assert f"127.0.0.1:{port}" in published


def test_ports_are_published_on_loopback_only() -> None:
    for name, service in services().items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} on every interface"
