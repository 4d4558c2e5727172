# Generic ephemeral volumes: an unscheduled pod's volume gets its claim <pod>-<volume>, owned by
# the pod, with the template's labels and spec; deleted, it is made again; a pod whose claim
# name is taken by a claim it does not own gets FailedBinding. The claims name no class, so
# upstream's PV binder (which kcm does not have) only records that nothing can bind them.
k apply -f - <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: clash-scratch}
spec: {accessModes: [ReadWriteOnce], storageClassName: "", resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  schedulerName: nobody
  containers: [{name: c, image: busybox}]
  volumes:
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        metadata: {labels: {tier: cache}}
        spec: {accessModes: [ReadWriteOnce], storageClassName: "", resources: {requests: {storage: 2Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: clash}
spec:
  schedulerName: nobody
  containers: [{name: c, image: busybox}]
  volumes:
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        spec: {accessModes: [ReadWriteOnce], storageClassName: "", resources: {requests: {storage: 2Gi}}}
YAML
present pvc/web-scratch 60
first=$(uid pvc/web-scratch)
k delete pvc web-scratch --wait=false >/dev/null
poll 60 eval '[ -n "$(k get pvc web-scratch -o jsonpath={.metadata.uid} 2>/dev/null)" ] && [ "$(uid pvc/web-scratch)" != "$first" ]'
poll 60 eval '[ -n "$(k get events --field-selector reason=FailedBinding,involvedObject.name=clash -o name)" ]'
