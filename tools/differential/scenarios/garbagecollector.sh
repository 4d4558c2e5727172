# Garbage collector: ConfigMaps owning ConfigMaps, deleted with each propagation policy; a child
# whose owner never existed; a Deployment deleted in the background with its ReplicaSet and pods.
# Shows what is left, and the orphaned child without its ownerReference.
for owner in fg orphan bg; do k create configmap "$owner"; done
child() {
  k apply -f - <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: $1
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: $2, uid: "$3"}]
YAML
}
child fg-child fg "$(uid configmap/fg)"
child orphan-child orphan "$(uid configmap/orphan)"
child bg-child bg "$(uid configmap/bg)"
child dangling-child never 0b5b6c4e-0000-4000-8000-000000000000
k create deployment web --image=nginx --replicas=2
settle deployment/web '{.status.availableReplicas}' 2
k delete configmap fg --cascade=foreground --wait=false
k delete configmap orphan --cascade=orphan
k delete configmap bg --wait=false
k delete deployment web --wait=false
gone configmap/fg
gone configmap/fg-child
gone configmap/bg-child
gone configmap/dangling-child
until_unset configmap/orphan-child '{.metadata.ownerReferences}' 60
until_none 90 replicasets,pods -l app=web
