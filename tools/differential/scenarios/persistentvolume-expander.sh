# Expansion of a CSI claim: a volume of the simulated driver (csi.sim.kcm.dev) pre-bound to a
# claim of the default class `standard` (allowVolumeExpansion), its binding completed by hand as
# the PV binder would (the binder's own write races it, to the same end). Growing the claim gets
# the ExternalExpanding Event from `volume_expand`; the simulated external-resizer grows the PV
# and leaves FileSystemResizePending for a node, none of which mounts it here.
k apply -f - <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {accessModes: [ReadWriteOnce], storageClassName: standard, volumeName: $NS-pv, resources: {requests: {storage: 1Gi}}}
YAML
# Pre-bound to the claim's uid, so upstream's binder only completes the binding, as this does.
kubectl apply -f - <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $NS-pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: standard
  persistentVolumeReclaimPolicy: Retain
  claimRef: {apiVersion: v1, kind: PersistentVolumeClaim, namespace: $NS, name: data, uid: $(uid pvc/data)}
  csi: {driver: csi.sim.kcm.dev, volumeHandle: $NS-pv}
YAML
kubectl patch pv "$NS-pv" --subresource=status --type=merge -p '{"status":{"phase":"Bound"}}' >/dev/null
k patch pvc data --subresource=status --type=merge \
  -p '{"status":{"phase":"Bound","accessModes":["ReadWriteOnce"],"capacity":{"storage":"1Gi"}}}' >/dev/null
settle pvc/data '{.status.phase}' Bound
k patch pvc data --type=merge -p '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}' >/dev/null
settle_condition pvc/data FileSystemResizePending
capture grown-volume pv "$NS-pv"
k delete pvc data --wait=false >/dev/null
kubectl delete pv "$NS-pv" --wait=false >/dev/null
