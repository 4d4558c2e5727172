# Deployment: 3 replicas, a new image rolled out, scaled to 5, rolled back; then paused and scaled.
# Shows the ReplicaSets (names, annotations, revision history), the rollout's Events and the
# Deployment's status and conditions.
k apply -f - <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: nginx, image: "nginx:1.0"}]
YAML
k rollout status deployment/web --timeout=90s
k set image deployment/web nginx=nginx:2.0
k rollout status deployment/web --timeout=90s
k scale deployment/web --replicas=5
settle deployment/web '{.status.availableReplicas}' 5
k rollout undo deployment/web
k rollout status deployment/web --timeout=90s
k rollout pause deployment/web
k scale deployment/web --replicas=2
settle deployment/web '{.status.availableReplicas}' 2
settle_condition deployment/web Progressing=Unknown
