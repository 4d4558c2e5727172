# Taint eviction: four pods, each holding a finalizer, bound to a Node made for the scenario
# (no kubelet: nothing else acts on them), which is then tainted NoExecute: the pod without a
# toleration is marked DisruptionTarget and deleted at once, the one tolerating 5 s after
# that, the one tolerating for ever is kept, and the taint's removal cancels the pending
# deletion of the one tolerating 600 s (Event). Done well within the 60 s after which
# upstream's node-lifecycle-controller would call the Node unreachable. The Node brings its own
# pod CIDR, high in the cluster CIDR, so that the node IPAM scenario's gets the same one.
kubectl apply -f - <<YAML
apiVersion: v1
kind: Node
metadata: {name: $NS-tainted, labels: {diff.kcm.dev/node: "true"}}
spec: {podCIDR: 10.244.250.0/24, podCIDRs: [10.244.250.0/24]}
YAML
_pod() {
  local name=$1 tolerations=$2
  k apply -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $name, finalizers: [example.com/hold]}
spec:
  nodeName: $NS-tainted
  tolerations: $tolerations
  containers: [{name: c, image: nginx}]
YAML
}
_pod plain '[]'
_pod forever '[{key: diff.kcm.dev/evict, operator: Exists, effect: NoExecute}]'
_pod brief '[{key: diff.kcm.dev/evict, operator: Exists, effect: NoExecute, tolerationSeconds: 5}]'
_pod patient '[{key: diff.kcm.dev/evict, operator: Exists, effect: NoExecute, tolerationSeconds: 600}]'
kubectl taint nodes "$NS-tainted" diff.kcm.dev/evict=x:NoExecute
until_set pod/plain '{.metadata.deletionTimestamp}' 30
until_set pod/brief '{.metadata.deletionTimestamp}' 30
kubectl taint nodes "$NS-tainted" diff.kcm.dev/evict:NoExecute-
_cancelled() { k get events -o 'jsonpath={.items[*].message}' | grep -q "Cancelling deletion of Pod $NS/patient"; }
poll 30 _cancelled
capture pods -n "$NS" pods
for pod in plain forever brief patient; do
  k patch pod "$pod" --type=merge -p '{"metadata":{"finalizers":null}}'
done
k delete pods --all --grace-period=0 --force >/dev/null 2>&1
until_none 30 pods
kubectl delete node "$NS-tainted"
