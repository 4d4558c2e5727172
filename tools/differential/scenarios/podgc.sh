# Pod GC: a pod bound to a node that does not exist (orphaned: removed after the 40 s quarantine)
# and an unscheduled pod being deleted; both hold a finalizer, so what the collector wrote before
# its delete (phase Failed, the DisruptionTarget condition) is captured.
k apply -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: orphaned, finalizers: [example.com/hold]}
spec:
  nodeName: $NS-ghost
  containers: [{name: c, image: nginx}]
---
apiVersion: v1
kind: Pod
metadata: {name: unscheduled, finalizers: [example.com/hold]}
spec:
  nodeSelector: {diff.kcm.dev/nowhere: "true"}
  containers: [{name: c, image: nginx}]
YAML
k delete pod unscheduled --wait=false
until_set pod/orphaned '{.metadata.deletionTimestamp}' 150
settle pod/orphaned '{.status.phase}' Failed 30
settle pod/unscheduled '{.status.phase}' Failed 30
capture pods -n "$NS" pods
k patch pod orphaned --type=merge -p '{"metadata":{"finalizers":null}}'
k patch pod unscheduled --type=merge -p '{"metadata":{"finalizers":null}}'
gone pod/orphaned
gone pod/unscheduled
