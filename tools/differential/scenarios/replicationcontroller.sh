# ReplicationController: 3 replicas, scaled to 1. Shows its status, its pods and the Events.
k apply -f - <<YAML
apiVersion: v1
kind: ReplicationController
metadata: {name: rc}
spec:
  replicas: 3
  selector: {app: rc}
  template:
    metadata: {labels: {app: rc}}
    spec: {containers: [{name: c, image: nginx}]}
YAML
settle replicationcontroller/rc '{.status.readyReplicas}' 3
k scale replicationcontroller/rc --replicas=1
settle replicationcontroller/rc '{.status.replicas}' 1
