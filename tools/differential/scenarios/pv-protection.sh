# PV protection: a PersistentVolume bound to nothing is deleted; the finalizer kube-apiserver
# gave it is lifted and it goes. (A Bound volume waits for the PV binder to release it: the
# persistentvolume-binder scenario.) Its class is one no claim names, so neither side's binder
# binds another scenario's claim to it.
kubectl apply -f - <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $NS-pv}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], storageClassName: $NS-unbindable, hostPath: {path: /tmp/$NS}}
YAML
kubectl delete pv "$NS-pv" --wait=false >/dev/null
poll 60 eval '[ -z "$(kubectl get pv "$NS-pv" --ignore-not-found -o name)" ]'
