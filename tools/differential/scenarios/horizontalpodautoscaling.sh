# HorizontalPodAutoscaler: an HPA on CPU over a Deployment. kube-apiserver here serves no
# metrics.k8s.io (no metrics-server), so both sides can only show how they fail: the conditions
# (AbleToScale, ScalingActive False) and the FailedGetResourceMetric Events.
k apply -f - <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: 100m}}}]}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 3
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}}]
YAML
settle deployment/web '{.status.availableReplicas}' 1
k wait hpa/web --for=condition=ScalingActive=False --timeout=90s >/dev/null
