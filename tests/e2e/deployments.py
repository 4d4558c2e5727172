"""A Deployment as a user pipes it into kubectl, for the kubectl tests (tests/e2e/test_kubectl.py,
test_kubectl_workloads.py).
"""

from __future__ import annotations

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels: {{app: {name}}}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: web
        image: {image}
        ports:
        - containerPort: 80
"""


def manifest(name: str, replicas: int = 2, image: str = "nginx:1.25") -> str:
    return DEPLOYMENT.format(name=name, replicas=replicas, image=image)
