# Node lifecycle: two Nodes made by hand, no kubelet behind them. One cordoned (the unschedulable
# NoSchedule taint) with only the stable os/arch labels (the beta ones added); the other never
# posts a status, so after --node-startup-grace-period (20 s on both sides, tools/differential/
# play.py) Ready and the pressure conditions are Unknown (NodeStatusNeverUpdated) and it gets the
# unreachable NoSchedule and NoExecute taints; so does the cordoned one. Each Node is a zone of its
# own, so neither waits for the other's NoExecute taint (--node-eviction-rate: one node per 10 s
# and zone). Shows both Nodes (captured); the Events, in `default` as every Node's, are checked by
# tests/e2e/test_nodelifecycle.py.
kubectl apply -f - <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $NS-cordoned
  labels:
    diff.kcm.dev/node: "true"
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    topology.kubernetes.io/zone: $NS-cordoned
spec: {unschedulable: true}
---
apiVersion: v1
kind: Node
metadata: {name: $NS-silent, labels: {diff.kcm.dev/node: "true", topology.kubernetes.io/zone: $NS-silent}}
YAML
_labelled() { [ "$(kubectl get node "$NS-cordoned" -o 'jsonpath={.metadata.labels.beta\.kubernetes\.io/arch}')" = amd64 ]; }
_taints() { kubectl get node "$1" -o 'jsonpath={range .spec.taints[*]}{.key}:{.effect} {end}'; }
_cordoned() { _taints "$NS-cordoned" | grep -q node.kubernetes.io/unschedulable:NoSchedule; }
_unreachable() { _taints "$1" | grep -q node.kubernetes.io/unreachable:NoExecute; }
poll 60 _labelled
poll 60 _cordoned
poll 150 _unreachable "$NS-silent"
poll 60 _unreachable "$NS-cordoned"
capture cordoned node "$NS-cordoned"
capture silent node "$NS-silent"
kubectl delete node "$NS-cordoned" "$NS-silent"
