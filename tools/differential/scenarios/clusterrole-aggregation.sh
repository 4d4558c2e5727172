# ClusterRole aggregation: a role aggregating two labelled roles, then one of them deleted.
# Shows the aggregated rules after each step (captured; the roles are cluster-scoped, named after
# the namespace).
kubectl apply -f - <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: $NS-aggregate}
aggregationRule:
  clusterRoleSelectors: [{matchLabels: {diff.kcm.dev/aggregate-to: $NS}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: $NS-a, labels: {diff.kcm.dev/aggregate-to: $NS}}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: $NS-b, labels: {diff.kcm.dev/aggregate-to: $NS}}
rules: [{apiGroups: [apps], resources: [deployments], verbs: [watch]}]
YAML
_rules() { [ "$(kubectl get clusterrole "$NS-aggregate" -o 'jsonpath={range .rules[*]}x {end}' | wc -w)" -eq "$1" ]; }
poll 60 _rules 2
capture both clusterrole "$NS-aggregate"
kubectl delete clusterrole "$NS-b"
poll 60 _rules 1
capture one clusterrole "$NS-aggregate"
kubectl delete clusterrole "$NS-aggregate" "$NS-a"
