# TTL: a Node created by hand gets the node.alpha.kubernetes.io/ttl annotation of a cluster this
# small (0 s); then it is deleted. Shows the Node (captured). Its pod CIDR is its own, high in the
# cluster CIDR, so that the node IPAM scenario's Node gets the same CIDR on both sides.
kubectl apply -f - <<YAML
apiVersion: v1
kind: Node
metadata: {name: $NS-node, labels: {diff.kcm.dev/node: "true"}}
spec: {podCIDR: 10.244.251.0/24, podCIDRs: [10.244.251.0/24]}
YAML
_ttl() { [ -n "$(kubectl get node "$NS-node" -o 'jsonpath={.metadata.annotations.node\.alpha\.kubernetes\.io/ttl}')" ]; }
poll 60 _ttl
capture node node "$NS-node"
kubectl delete node "$NS-node"
