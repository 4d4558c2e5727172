# Node lifecycle: two Nodes made by hand, no kubelet behind them. One cordoned (the unschedulable
# NoSchedule taint) with only the stable os/arch labels (the beta ones added); the other never
# posts a status, so after --node-startup-grace-period (20 s on both sides, tools/differential/
# play.py) Ready and the pressure conditions are Unknown (NodeStatusNeverUpdated) and it gets the
# unreachable NoSchedule and NoExecute taints. Shows both Nodes (captured) and the silent one's
# Events (in `default`, as every Node's).
kubectl apply -f - <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $NS-cordoned
  labels: {diff.kcm.dev/node: "true", kubernetes.io/os: linux, kubernetes.io/arch: amd64}
spec: {unschedulable: true}
---
apiVersion: v1
kind: Node
metadata: {name: $NS-silent, labels: {diff.kcm.dev/node: "true"}}
YAML
_labelled() { [ "$(kubectl get node "$NS-cordoned" -o 'jsonpath={.metadata.labels.beta\.kubernetes\.io/arch}')" = amd64 ]; }
_cordoned() { kubectl get node "$NS-cordoned" -o 'jsonpath={.spec.taints[*].key}' | grep -qx node.kubernetes.io/unschedulable; }
_unreachable() {
  [ "$(kubectl get node "$NS-silent" -o 'jsonpath={.spec.taints[*].effect}')" = "NoSchedule NoExecute" ] ||
    [ "$(kubectl get node "$NS-silent" -o 'jsonpath={.spec.taints[*].effect}')" = "NoExecute NoSchedule" ]
}
poll 60 _labelled
poll 60 _cordoned
poll 150 _unreachable
capture cordoned node "$NS-cordoned"
capture silent node "$NS-silent"
capture silent-events events -n default --field-selector "involvedObject.name=$NS-silent"
kubectl delete node "$NS-cordoned" "$NS-silent"
