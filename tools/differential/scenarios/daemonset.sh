# DaemonSet on the simulated nodes: created, then a new image rolled out. Shows its pods (one per
# node, with the node affinity and tolerations it adds), ControllerRevisions, status and Events.
k apply -f - <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds}
spec:
  selector: {matchLabels: {app: ds}}
  template:
    metadata: {labels: {app: ds}}
    spec:
      terminationGracePeriodSeconds: 1
      nodeSelector: {sim.kcm.dev/simulated: "true"}
      containers: [{name: c, image: nginx:1.0}]
YAML
settle daemonset/ds '{.status.numberReady}' 3
k set image daemonset/ds c=nginx:2.0
k rollout status daemonset/ds --timeout=120s
