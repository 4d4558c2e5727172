"""Record what kube-apiserver sends as protobuf and as JSON for the same objects.

- Writes tests/unit/shared/apimachinery/fixtures/kube_apiserver_protobuf.json: for each read,
  the path, the JSON body and the protobuf body (base64) kube-apiserver answered with, taken at
  the same resourceVersion, so a decoder's output can be checked against the server's own JSON.
- Reads: single objects of many kinds (Time, MicroTime, Quantity, IntOrString, inline structs,
  maps, bytes, pointers), lists (one with a continue token), a 404's metav1.Status, and a
  watch stream (kube-apiserver's length-prefixed frames) beside the JSON lines of the same events.
- Run by hand against a `kcm dev --apiserver=upstream` stack (it creates a namespace,
  `protobuf-fixtures` unless `--namespace` names another): `python tools/record_protobuf.py KUBECONFIG`. Nothing else calls it;
  rerun it when moving to a newer kube-apiserver and commit the JSON it writes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
from kcm_shared.client import kubeclient

OUTPUT = (
    Path(__file__).resolve().parent.parent
    / "tests/unit/shared/apimachinery/fixtures/kube_apiserver_protobuf.json"
)
PROTOBUF = "application/vnd.kubernetes.protobuf"

MANIFESTS = """
apiVersion: v1
kind: ConfigMap
metadata: {{name: cm, namespace: {ns}, labels: {{a: b}}, annotations: {{note: "x: y"}}}}
data: {{key: value, empty: ""}}
binaryData: {{blob: AAECAwQ=}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: cm2, namespace: {ns}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: rich, namespace: {ns}, labels: {{app: rich}}}}
spec:
  terminationGracePeriodSeconds: 5
  activeDeadlineSeconds: 600
  tolerations:
  - {{key: k, operator: Exists, effect: NoExecute, tolerationSeconds: 30}}
  securityContext: {{runAsUser: 1000, runAsNonRoot: true, fsGroup: 2000}}
  volumes:
  - name: data
    emptyDir: {{sizeLimit: 64Mi}}
  - name: cfg
    configMap: {{name: cm, defaultMode: 0o644, optional: true}}
  initContainers:
  - name: init
    image: busybox
    restartPolicy: Always
  containers:
  - name: main
    image: nginx:1.27
    args: ["-g", "daemon off;"]
    env:
    - {{name: A, value: "1"}}
    - name: POD
      valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
    envFrom:
    - configMapRef: {{name: cm}}
    ports:
    - {{containerPort: 80, name: http, protocol: TCP}}
    resources:
      requests: {{cpu: 100m, memory: 1.5Gi}}
      limits: {{cpu: "2", memory: 2Gi, ephemeral-storage: 1G}}
    readinessProbe:
      httpGet: {{path: /, port: http}}
      periodSeconds: 3
    livenessProbe:
      tcpSocket: {{port: 80}}
      initialDelaySeconds: 1
    volumeMounts:
    - {{name: data, mountPath: /data, readOnly: false}}
    securityContext:
      capabilities: {{add: [NET_ADMIN], drop: [ALL]}}
      allowPrivilegeEscalation: false
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  strategy: {{type: RollingUpdate, rollingUpdate: {{maxSurge: 25%, maxUnavailable: 1}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: c, image: nginx}}]
---
apiVersion: v1
kind: Service
metadata: {{name: svc, namespace: {ns}}}
spec:
  selector: {{app: web}}
  ports:
  - {{name: http, port: 80, targetPort: http}}
  - {{name: num, port: 81, targetPort: 8081, protocol: UDP}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {{name: cron, namespace: {ns}}}
spec:
  schedule: "*/5 * * * *"
  suspend: true
  jobTemplate:
    spec:
      backoffLimit: 2
      template:
        spec:
          restartPolicy: Never
          containers: [{{name: c, image: busybox}}]
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {{name: lease, namespace: {ns}}}
spec: {{holderIdentity: me, leaseDurationSeconds: 15, acquireTime: "2026-01-02T03:04:05.123456Z",
        renewTime: "2026-01-02T03:04:06.000001Z"}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: hpa, namespace: {ns}}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 50}}}}
  behavior:
    scaleDown: {{stabilizationWindowSeconds: 30, policies: [{{type: Percent, value: 10, periodSeconds: 60}}]}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: claim, namespace: {ns}}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 1Gi}}}}
  storageClassName: ""
"""

# (name, path) of each single read; lists and the watch are below.
OBJECTS = [
    ("configmap", "/api/v1/namespaces/{ns}/configmaps/cm"),
    ("pod", "/api/v1/namespaces/{ns}/pods/rich"),
    ("deployment", "/apis/apps/v1/namespaces/{ns}/deployments/web"),
    ("service", "/api/v1/namespaces/{ns}/services/svc"),
    ("cronjob", "/apis/batch/v1/namespaces/{ns}/cronjobs/cron"),
    ("lease", "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/lease"),
    ("hpa", "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers/hpa"),
    ("pvc", "/api/v1/namespaces/{ns}/persistentvolumeclaims/claim"),
    ("namespace", "/api/v1/namespaces/{ns}"),
    ("node", "/api/v1/nodes/{node}"),
]
LISTS = [
    ("podlist", "/api/v1/namespaces/{ns}/pods", {}),
    ("replicasetlist", "/apis/apps/v1/namespaces/{ns}/replicasets", {}),
    ("endpointslicelist", "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", {}),
    ("eventlist", "/apis/events.k8s.io/v1/namespaces/{ns}/events", {}),
    ("configmaplist_page", "/api/v1/namespaces/{ns}/configmaps", {"limit": "1"}),
]


async def get(
    session: aiohttp.ClientSession, url: str, accept: str, params: dict[str, str]
) -> tuple[int, str, bytes]:
    async with session.get(url, headers={"Accept": accept}, params=params) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), await resp.read()


async def pair(
    session: aiohttp.ClientSession, server: str, path: str, params: dict[str, str]
) -> dict[str, Any]:
    """JSON and protobuf answers to one read, retried until both are of the same resourceVersion."""
    for _ in range(50):
        code, ctype, raw_json = await get(session, server + path, "application/json", params)
        pcode, pctype, raw_proto = await get(session, server + path, f"{PROTOBUF}, application/json", params)
        if ctype.startswith("application/json") and pctype == PROTOBUF and code == pcode:
            body = json.loads(raw_json)
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv is None or rv.encode() in raw_proto:
                return {
                    "path": path,
                    "params": params,
                    "code": code,
                    "json": raw_json.decode(),
                    "protobuf": base64.b64encode(raw_proto).decode(),
                }
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{path}: no JSON and protobuf answer at one resourceVersion")


async def watch(session: aiohttp.ClientSession, server: str, path: str) -> dict[str, Any]:
    """A watch from resourceVersion 0 (the current objects as ADDED events), as frames and lines."""
    params = {"watch": "true", "resourceVersion": "0", "timeoutSeconds": "1", "allowWatchBookmarks": "false"}
    for _ in range(20):
        _, ctype, lines = await get(session, server + path, "application/json", params)
        _, pctype, frames = await get(session, server + path, f"{PROTOBUF}, application/json", params)
        json_ok = ctype.startswith("application/json")
        if (
            json_ok
            and pctype == f"{PROTOBUF};stream=watch"
            and 0 < frames.count(b"k8s\x00") == lines.count(b"\n")
        ):
            return {
                "path": path,
                "params": params,
                "content_type": pctype,
                "json": lines.decode(),
                "protobuf": base64.b64encode(frames).decode(),
            }
    raise RuntimeError(f"{path}: watch answers differ")


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        text=True,
        capture_output=True,
        check=True,
    ).stdout


async def record(kubeconfig: str, ns: str) -> dict[str, Any]:
    kubectl(kubeconfig, "create", "namespace", ns)
    kubectl(kubeconfig, "apply", "-f", "-", stdin=MANIFESTS.format(ns=ns))
    kubectl(kubeconfig, "-n", ns, "wait", "--for=condition=Available", "deployment/web", "--timeout=60s")
    kubectl(kubeconfig, "-n", ns, "wait", "--for=condition=Ready", "pod/rich", "--timeout=60s")
    node = kubectl(kubeconfig, "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
    conn = kubeclient.load_connection(kubeconfig)
    connector = aiohttp.TCPConnector(ssl=conn.ssl_context)
    out: dict[str, Any] = {"server": "", "reads": {}, "watch": {}}
    async with aiohttp.ClientSession(connector=connector, headers=conn.headers) as session:
        _, _, version = await get(session, conn.server + "/version", "application/json", {})
        out["server"] = json.loads(version)["gitVersion"]
        for name, path in OBJECTS:
            out["reads"][name] = await pair(session, conn.server, path.format(node=node, ns=ns), {})
        for name, path, params in LISTS:
            out["reads"][name] = await pair(session, conn.server, path.format(ns=ns), params)
        out["reads"]["status_404"] = await pair(
            session, conn.server, f"/api/v1/namespaces/{ns}/pods/absent", {}
        )
        out["watch"] = await watch(session, conn.server, f"/api/v1/namespaces/{ns}/pods")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kubeconfig")
    p.add_argument("--namespace", default="protobuf-fixtures", help="created for the objects read")
    args = p.parse_args()
    data = asyncio.run(record(args.kubeconfig, args.namespace))
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUTPUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
