# Disruption: a PodDisruptionBudget (minAvailable 2) over three pods; one pod evicted, and its
# replacement counted; a budget selecting no pod. Shows the budgets' status and conditions and the
# NoPods Event.
k apply -f - <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}, annotations: {sim.kcm.dev/terminate-seconds: "0"}}
    spec: {containers: [{name: c, image: nginx}]}
YAML
settle deployment/web '{.status.availableReplicas}' 3
k apply -f - <<YAML
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pdb}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: empty}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: nothing}}
YAML
settle pdb/pdb '{.status.currentHealthy}' 3
settle pdb/pdb '{.status.disruptionsAllowed}' 1
victim=$(k get pods -l app=web -o 'jsonpath={.items[0].metadata.name}')
k create --raw "/api/v1/namespaces/$NS/pods/$victim/eviction" -f - >/dev/null <<JSON
{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "$victim", "namespace": "$NS"}}
JSON
gone "pod/$victim"
settle pdb/pdb '{.status.currentHealthy}' 3
settle pdb/pdb '{.status.disruptionsAllowed}' 1
until_set pdb/empty '{.status.observedGeneration}'
