# ReplicaSet: 3 replicas scaled to 1; a second one adopts a running orphan pod and makes the rest.
# Shows the ReplicaSets' status, the pods they made and adopted, and the Events.
k apply -f - <<YAML
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  replicas: 3
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: c, image: nginx}]}
YAML
settle replicaset/rs '{.status.readyReplicas}' 3
k scale replicaset/rs --replicas=1
settle replicaset/rs '{.status.replicas}' 1
k run orphan --image=nginx --labels=app=adopter
settle_condition pod/orphan Ready
k apply -f - <<YAML
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: adopter}
spec:
  replicas: 2
  selector: {matchLabels: {app: adopter}}
  template:
    metadata: {labels: {app: adopter}}
    spec: {containers: [{name: c, image: nginx}]}
YAML
settle replicaset/adopter '{.status.readyReplicas}' 2
