# PVC protection. The used claim is of the default class `standard` (the simulated CSI driver's,
# WaitForFirstConsumer): a pod starts only once its claims are Bound, which the PV binder and the
# driver do. The unused one names no class (storageClassName "") and no volume, so upstream's PV
# binder only records that nothing can bind it. A claim used by a running pod stays Terminating
# (captured) while an unused one goes; once the pod is deleted the claim goes too.
k apply -f - <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: spare}
spec: {accessModes: [ReadWriteOnce], storageClassName: "", resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: user}
spec:
  containers: [{name: c, image: busybox}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]
YAML
settle pod/user '{.status.phase}' Running
k delete pvc data --wait=false >/dev/null
k delete pvc spare --wait=false >/dev/null
gone pvc/spare 60
capture kept-claim pvc data --namespace "$NS"
k delete pod user --wait=false >/dev/null
gone pvc/data 60
