# Node IPAM: a Node created by hand gets a pod CIDR from the cluster CIDR; then it is deleted (its
# CIDR released, so the other side gets the same one). Shows the Node's spec (captured).
kubectl apply -f - <<YAML
apiVersion: v1
kind: Node
metadata: {name: $NS-node, labels: {diff.kcm.dev/node: "true"}}
YAML
_cidr() { [ -n "$(kubectl get node "$NS-node" -o "jsonpath={.spec.podCIDR}")" ]; }
poll 60 _cidr
capture node node "$NS-node"
kubectl delete node "$NS-node"
