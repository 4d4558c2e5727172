# PV protection: a PersistentVolume bound to nothing is deleted; the finalizer kube-apiserver
# gave it is lifted and it goes. (A Bound volume waits for the PV binder to release it, which
# kcm does not have yet: tests/e2e/test_volume_protection.py releases one by hand.) Its class is
# one no claim names, so upstream's binder never binds another scenario's claim to it.
kubectl apply -f - <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $NS-pv}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], storageClassName: $NS-unbindable, hostPath: {path: /tmp/$NS}}
YAML
kubectl delete pv "$NS-pv" --wait=false >/dev/null
poll 60 eval '[ -z "$(kubectl get pv "$NS-pv" --ignore-not-found -o name)" ]'
