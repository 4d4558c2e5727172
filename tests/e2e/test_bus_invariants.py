"""The architecture's invariants, end to end: real apiserver, nats-server, watcher, coordinator
and probe controller replicas, each killed with -9 in the middle of a load.

1. No lost change: after any one process is killed, every ConfigMap is reconciled against its
   latest state. 2. No concurrent reconcile of one key across replicas (probe records each
   sync's interval). 4. A key the controller gives up on lands on the dead-letter subject. 7. A stuck loop shows
   unhealthy in the coordinator's /healthz/<controller>.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ApiServer, NatsProc, start_apiserver, start_nats, wait_for
from tests.e2e.bus_stack import Proc, Stack, wait_owned

NAMESPACE = "default"
_round = itertools.count()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("bus")
    api: ApiServer = start_apiserver(workdir / "api")
    nats: NatsProc = start_nats(workdir)
    s = Stack(api, nats, workdir, workdir / "probe.jsonl")
    try:
        s.watcher()
        s.coordinator()
        s.probe("probe-a")
        s.probe("probe-b")
        yield s
    finally:
        s.stop()
        nats.stop()
        api.stop()


def _core(stack: Stack) -> Any:
    client, api_client = stack.api.client()
    return client.CoreV1Api(api_client)


def _apply(core: Any, name: str, data: dict[str, str]) -> None:
    from kubernetes.client import ApiException

    body = {"metadata": {"name": name}, "data": data}
    try:
        core.replace_namespaced_config_map(name, NAMESPACE, body)
    except ApiException as exc:
        if exc.status != 404:
            raise
        core.create_namespaced_config_map(NAMESPACE, body)


def _overlaps(records: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        by_key[rec["key"]].append(rec)
    found = []
    for recs in by_key.values():
        recs.sort(key=lambda r: r["start"])
        found += [(a, b) for a, b in itertools.pairwise(recs) if b["start"] < a["end"]]
    return found


def _converged(stack: Stack, final: dict[str, str]) -> bool:
    seen: dict[str, set[str]] = defaultdict(set)
    for rec in stack.records():
        if rec.get("value") is not None:
            seen[rec["key"]].add(rec["value"])
    return all(value in seen[f"{NAMESPACE}/{name}"] for name, value in final.items())


def _by_name(stack: Stack, name: str) -> Proc:
    return next(p for p in reversed(stack.procs) if p.name == name)


@pytest.mark.parametrize("victim", ["watcher-0", "probe-a", "coordinator-0", "nats-server"])
def test_no_change_is_lost_and_no_key_runs_twice_when_a_process_is_killed(stack: Stack, victim: str) -> None:
    core = _core(stack)
    wait_owned(stack, _by_name(stack, "coordinator-0"), replicas=2, timeout=60)
    n = next(_round)
    names = [f"r{n}-cm-{i}" for i in range(40)]
    final: dict[str, str] = {}
    for step in range(3):
        if step == 1:
            if victim == "nats-server":
                stack.nats.kill()
            else:
                _by_name(stack, victim).kill()
        for name in names:
            final[name] = f"{name}-v{step}"
            _apply(core, name, {"value": final[name], "sleep": "0.01"})
        if step == 1:
            if victim == "nats-server":
                stack.nats.start()
            else:
                proc = _by_name(stack, victim)
                proc.start()
    wait_for(
        lambda: _converged(stack, final), 90, interval=0.3, what=f"every change reconciled ({stack.logs()})"
    )
    assert _overlaps(stack.records()) == []


def test_scaling_replicas_up_and_down_under_load_keeps_every_key_owned_once(stack: Stack) -> None:
    core = _core(stack)
    coordinator = _by_name(stack, "coordinator-0")
    wait_owned(stack, coordinator, replicas=2, timeout=60)
    names = [f"scale-cm-{i}" for i in range(40)]
    final: dict[str, str] = {}
    extra: list[Proc] = []
    for step in range(4):
        if step == 1:
            extra = [stack.probe("probe-c"), stack.probe("probe-d")]
        if step == 2:
            wait_owned(stack, coordinator, replicas=4, timeout=60)
        if step == 3:
            extra[0].stop()  # leaves cleanly, handing its partitions back
            extra[1].kill()  # vanishes: its partitions move only after its lease
        for name in names:
            final[name] = f"{name}-v{step}"
            _apply(core, name, {"value": final[name], "sleep": "0.01"})
    wait_owned(stack, coordinator, replicas=2, timeout=60)
    wait_for(
        lambda: _converged(stack, final), 90, interval=0.3, what=f"every change reconciled ({stack.logs()})"
    )
    assert _overlaps(stack.records()) == []


def test_poison_key_is_dead_lettered_with_its_reason_and_other_keys_flow(stack: Stack) -> None:
    import asyncio

    import nats

    core = _core(stack)
    # A failing key is retried for ever; only the controller's verdict dead-letters it.
    _apply(core, "poison", {"fail": "terminal", "value": "poison"})
    _apply(core, "healthy", {"value": "healthy-1"})
    wait_for(lambda: _converged(stack, {"healthy": "healthy-1"}), 60, what="healthy key reconciled")

    async def dead_letters() -> list[tuple[str, str]]:
        nc = await nats.connect(stack.nats.url, nkeys_seed=stack.seed("admin"))
        try:
            js = nc.jetstream()
            sub = await js.subscribe("kcm.dlq.probe-controller", ordered_consumer=True)
            out = []
            try:
                while True:
                    msg = await sub.next_msg(timeout=1)
                    headers = msg.headers or {}
                    out.append((headers.get("Kcm-Key", ""), headers.get("Kcm-Reason", "")))
            except nats.errors.TimeoutError:
                return out
        finally:
            await nc.close()

    found = wait_for(
        lambda: [d for d in asyncio.run(dead_letters()) if d[0] == f"{NAMESPACE}/poison"],
        120,
        interval=1,
        what="poison key on the dead-letter subject",
    )
    assert "probe told to fail" in found[0][1]


def test_stuck_loop_turns_controller_unhealthy_and_recovers(stack: Stack) -> None:
    coordinator = _by_name(stack, "coordinator-0")
    wait_owned(stack, coordinator, replicas=2, timeout=60)
    wait_for(lambda: coordinator.get("/healthz/probe-controller")[0] == 200, 60, what="healthy first")
    core = _core(stack)
    _apply(core, "stuck", {"sleep": "8", "value": "stuck"})
    flowing = itertools.count()

    def unhealthy_while_others_flow() -> tuple[int, str] | None:
        # Other keys keep being reconciled: one stuck worker must not hide behind them.
        _apply(core, "flowing", {"value": f"flowing-{next(flowing)}"})
        code, text = coordinator.get("/healthz/probe-controller")
        return (code, text) if code == 500 else None

    _, body = wait_for(unhealthy_while_others_flow, 40, interval=0.3, what="unhealthy while stuck")
    assert "stuck" in body, body
    assert _converged(stack, {"flowing": f"flowing-{next(flowing) - 2}"}), "other keys kept flowing"
    wait_for(lambda: coordinator.get("/healthz/probe-controller")[0] == 200, 60, what="healthy again")
