# PV binder: static binding (the smallest Available volume of the claim's class), a claim naming
# its volume, a volume pre-bound to a claim, and release with Retain. The volumes are named after
# the namespace and carry a class only this scenario's claims name, so no other scenario's claim
# can take them (and these claims take no other volume).
pv() { # NAME SIZE [CLAIMREF]
  printf -- '---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: %s}\nspec: {capacity: {storage: %s}, accessModes: [ReadWriteOnce], persistentVolumeReclaimPolicy: Retain, storageClassName: %s, csi: {driver: csi.sim.kcm.dev, volumeHandle: %s}%s}\n' \
    "$NS-$1" "$2" "$NS" "$NS-$1" "${3:-}"
}
{
  pv small 1Gi
  pv big 5Gi
  pv named 2Gi
  pv reserved 3Gi ", claimRef: {namespace: $NS, name: reserved}"
} | kubectl apply -f - >/dev/null
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {accessModes: [ReadWriteOnce], storageClassName: $NS, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: named}
spec: {accessModes: [ReadWriteOnce], storageClassName: $NS, volumeName: $NS-named, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: reserved}
spec: {accessModes: [ReadWriteOnce], storageClassName: $NS, resources: {requests: {storage: 1Gi}}}
YAML
for claim in data named reserved; do settle "pvc/$claim" '{.status.phase}' Bound; done
_pv_phase() { [ "$(kubectl get pv "$NS-$1" -o 'jsonpath={.status.phase}')" = "$2" ]; }
for volume in small named reserved; do poll 60 _pv_phase "$volume" Bound; done
capture volumes-bound pv "$NS-small" "$NS-big" "$NS-named" "$NS-reserved"
k delete pvc data --wait=false >/dev/null
gone pvc/data 60
poll 60 _pv_phase small Released
capture volume-released pv "$NS-small"
