"""`kcm sim`: run the simulated nodes, scheduler and kubelet against an API server until cancelled.

Called by the launcher (`kcm sim`, and in-process by `kcm dev`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from kcm_shared.client.kubeclient import KubeClient, load_connection, resource_path

from kcm_simulator import control, csi, informer, kubeletserver, podstatus
from kcm_simulator.attacher import ExternalAttacher
from kcm_simulator.calls import Writer
from kcm_simulator.kubelet import Kubelet
from kcm_simulator.nodevolumes import NodeVolumes
from kcm_simulator.podbook import PodBook
from kcm_simulator.scheduler import Scheduler

log = logging.getLogger("kcm.sim")


@dataclass
class Options:
    kubeconfig: Path
    nodes: int = 3
    zones: int = 3
    pod_start_delay: float = 0.5
    node_prefix: str = "sim-node-"
    heartbeat_interval: float = 10.0
    control_port: int | None = 0
    control_file: Path | None = None
    # Register nodes without a podCIDR and wait for the node IPAM controller's (`kcm dev` sets it
    # when that controller runs with --allocate-node-cidrs).
    node_ipam: bool = False
    # Remove and put back the not-ready NoSchedule taint itself, for a stack that runs no node
    # lifecycle controller (`kcm dev` sets it when that controller is left out).
    manage_not_ready_taint: bool = False
    # Unlimited: the sim speaks for N kubelets and a scheduler, each with its own budget upstream;
    # one shared 200/s was spent on 1,000 nodes' heartbeats alone. The Writer bounds concurrency.
    qps: float = 0.0
    burst: int = 400
    # Seconds a container takes to exit after SIGTERM; None: it ignores SIGTERM and is killed
    # when the grace period ends (the simulator's behaviour before containers stopped promptly).
    stop_seconds: float | None = podstatus.STOP_SECONDS
    # Multiplies the image pull back-off (10 s doubling to 300 s), e.g. 0.01 for tests.
    backoff_scale: float = 1.0
    # Schedule and start pods without waiting for their claims, for a stack without a PV binder
    # (`kcm dev` sets it then): nothing would ever bind them. The CSI driver's sidecars run anyway.
    ignore_claims: bool = False
    # Start pods without waiting for their attachable volumes in the node's volumesAttached, for
    # a stack without an attach/detach controller (`kcm dev` sets it then).
    ignore_attachments: bool = False
    # The kubelet server (logs, exec, attach, port-forward): its address, registered on every
    # Node, and port (0: any free one); None: no server, and Nodes name port 10250 as before.
    kubelet_address: str = "127.0.0.1"
    kubelet_port: int | None = 0
    # PEM CAs whose client certificates the kubelet server requires (kube-apiserver's
    # --kubelet-client-certificate is signed by one); empty: any client is served.
    kubelet_client_ca: bytes = b""


async def run(opts: Options) -> None:
    client = KubeClient(
        load_connection(str(opts.kubeconfig)), qps=opts.qps, burst=opts.burst, user_agent="kcm-sim"
    )
    writer = Writer()
    volumes = NodeVolumes(client, writer, wait_attached=not opts.ignore_attachments)
    attacher = ExternalAttacher(client, writer)
    store = csi.VolumeStore()
    binding = None if opts.ignore_claims else store
    book = PodBook()
    streams = None
    endpoint = None
    if opts.kubelet_port is not None:
        server = kubeletserver.KubeletServer(book, lambda node: node in kubelet.nodes)
        streams, port = await kubeletserver.start(
            server, opts.kubelet_address, opts.kubelet_port, opts.kubelet_client_ca
        )
        endpoint = (opts.kubelet_address, port)
        log.info("kubelet server listening", extra={"address": opts.kubelet_address, "port": port})
    kubelet = Kubelet(
        client,
        writer,
        count=opts.nodes,
        zones=opts.zones,
        prefix=opts.node_prefix,
        pod_start_delay=opts.pod_start_delay,
        heartbeat_interval=opts.heartbeat_interval,
        node_ipam=opts.node_ipam,
        stop_seconds=opts.stop_seconds,
        manage_not_ready_taint=opts.manage_not_ready_taint,
        volumes=volumes,
        backoff_scale=opts.backoff_scale,
        store=binding,
        endpoint=endpoint,
    )
    scheduler = Scheduler(client, writer, binding)
    driver = csi.Driver(client, writer, store, lambda node: node in kubelet.nodes)

    def reset_pods(pods: list[dict[str, object]]) -> None:
        scheduler.reset_pods(pods)
        kubelet.reset_pods(pods)
        driver.reset(driver.pods_held(), driver.on_pod, pods)
        book.reset(pods)

    def reset_nodes(items: list[dict[str, object]]) -> None:
        driver.reset(store.nodes, driver.on_node, items)
        scheduler.reset_nodes(items)
        kubelet.reset_nodes(items)
        for node in items:
            volumes.on_node("ADDED", node)

    def on_node(kind: str, node: dict[str, object]) -> None:
        driver.on_node(kind, node)
        scheduler.on_node(kind, node)
        kubelet.on_node(kind, node)
        volumes.on_node(kind, node)

    def on_pod(kind: str, pod: dict[str, object]) -> None:
        scheduler.on_pod(kind, pod)
        kubelet.on_pod(kind, pod)
        driver.on_pod(kind, pod)
        if kind == "DELETED":
            book.remove(pod)
        else:
            book.put(pod)

    runner = None
    if opts.control_port is not None:
        runner = await control.start(kubelet, opts.control_port, opts.control_file)
    log.info("simulator starting", extra={"nodes": opts.nodes, "server": client.conn.server})
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(kubelet.run_nodes())
            group.create_task(scheduler.run())
            group.create_task(kubelet.events.run())
            group.create_task(scheduler.events.run())
            group.create_task(informer.run(client, resource_path("", "v1", "nodes"), reset_nodes, on_node))
            group.create_task(informer.run(client, resource_path("", "v1", "pods"), reset_pods, on_pod))
            group.create_task(volumes.run())
            attachments = resource_path("storage.k8s.io", "v1", "volumeattachments")
            group.create_task(informer.run(client, attachments, attacher.reset, attacher.on_event))
            group.create_task(driver.run())
            for path, held, handler in (
                (resource_path("storage.k8s.io", "v1", "storageclasses"), store.classes, driver.on_class),
                (resource_path("", "v1", "persistentvolumes"), store.pvs, driver.on_pv),
                (resource_path("", "v1", "persistentvolumeclaims"), store.claims, driver.on_claim),
            ):
                group.create_task(informer.run(client, path, partial(driver.reset, held, handler), handler))
    finally:
        try:
            await kubelet.stop()
            if runner is not None:
                await runner.cleanup()
            if streams is not None:
                await streams.cleanup()
        finally:
            # Even when stopping is itself interrupted (a second Ctrl-C), leave no open connections.
            await client.close()
