# PV binder Events and reclaim: a claim no volume fits and with no class (FailedBinding), a claim
# naming a volume too small for it (VolumeMismatch), a WaitForFirstConsumer claim no pod uses
# (WaitForFirstConsumer), a claim whose class names an external provisioner nobody runs
# (ExternalProvisioning and both provisioner annotations), and reclaim Delete of two static
# volumes: a CSI one stays Released for its external deleter, an NFS one is Failed
# (VolumeFailedDelete, no in-tree deleter for NFS). Classes and volumes are named after the
# namespace; the class-less claim selects a label no volume has, so no other scenario's volume
# can bind it.
kubectl apply -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: $NS-wffc}
provisioner: csi.sim.kcm.dev
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: $NS-ext}
provisioner: example.com/nobody
volumeBindingMode: Immediate
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: $NS-tiny}
spec: {capacity: {storage: 1Mi}, accessModes: [ReadWriteOnce], persistentVolumeReclaimPolicy: Retain, storageClassName: $NS, csi: {driver: csi.sim.kcm.dev, volumeHandle: $NS-tiny}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: $NS-csi}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], persistentVolumeReclaimPolicy: Delete, storageClassName: $NS, claimRef: {namespace: $NS, name: csi}, csi: {driver: csi.sim.kcm.dev, volumeHandle: $NS-csi}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: $NS-nfs}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], persistentVolumeReclaimPolicy: Delete, storageClassName: $NS, claimRef: {namespace: $NS, name: nfs}, nfs: {server: nfs.example, path: /$NS}}
YAML
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: nothing}
spec: {accessModes: [ReadWriteOnce], storageClassName: "", selector: {matchLabels: {scenario: $NS}}, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: toobig}
spec: {accessModes: [ReadWriteOnce], storageClassName: $NS, volumeName: $NS-tiny, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: later}
spec: {accessModes: [ReadWriteOnce], storageClassName: $NS-wffc, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: external}
spec: {accessModes: [ReadWriteOnce], storageClassName: $NS-ext, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: csi}
spec: {accessModes: [ReadWriteOnce], storageClassName: $NS, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: nfs}
spec: {accessModes: [ReadWriteOnce], storageClassName: $NS, resources: {requests: {storage: 1Gi}}}
YAML
_event() { [ -n "$(k get events --field-selector "reason=$1,involvedObject.name=$2" -o name)" ]; }
poll 60 _event FailedBinding nothing
poll 60 _event VolumeMismatch toobig
poll 60 _event WaitForFirstConsumer later
poll 60 _event ExternalProvisioning external
until_set pvc/external '{.metadata.annotations.volume\.kubernetes\.io/storage-provisioner}' 60
for claim in csi nfs; do settle "pvc/$claim" '{.status.phase}' Bound; done
k delete pvc csi nfs --wait=false >/dev/null
gone pvc/csi 60
gone pvc/nfs 60
_pv_phase() { [ "$(kubectl get pv "$NS-$1" -o 'jsonpath={.status.phase}')" = "$2" ]; }
poll 60 _pv_phase csi Released
poll 60 _pv_phase nfs Failed
capture volumes-reclaimed pv "$NS-csi" "$NS-nfs" "$NS-tiny"
