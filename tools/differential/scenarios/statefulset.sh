# StatefulSet with a claim template: 2 replicas, scaled to 3, a new image rolled out, scaled to 1.
# Shows the pods, claims and ControllerRevisions it made, its status and Events. The claims stay
# Pending on both sides (no volume provisioner); upstream's persistentvolume-binder, which kcm does
# not have, says so in Events of its own.
k apply -f - <<YAML
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: nginx:1.0}]
  volumeClaimTemplates:
    - metadata: {name: data}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 1Gi}}
YAML
settle statefulset/web '{.status.readyReplicas}' 2
k scale statefulset/web --replicas=3
settle statefulset/web '{.status.readyReplicas}' 3
k set image statefulset/web c=nginx:2.0
k rollout status statefulset/web --timeout=120s
k scale statefulset/web --replicas=1
settle statefulset/web '{.status.replicas}' 1
gone pod/web-1
