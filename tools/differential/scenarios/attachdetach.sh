# Attach/detach: a pod on a node using a CSI volume of an attachable driver (csi.sim.kcm.dev,
# whose attacher the simulator plays) gets a VolumeAttachment under upstream's name, attached
# before the pod runs (SuccessfulAttachVolume on the pod); the pod deleted, the volume is
# detached and the attachment goes. The claim names its PV and the PV's claimRef the claim's
# uid, so each side's PV binder only completes the binding (phases, bind-completed): the claim
# is made first without bind-completed (a binder keeps it Pending until its PV exists; with the
# annotation a binder that looks before the PV exists calls it lost), the PV after. Both sides
# share the API server, so the PV is named after the namespace (the reference side's PV stays);
# the pod names its node and the volume handle is fixed, so the attachment's name (a hash of
# handle, driver and node) is the same on both sides, the reference side's gone by then.
kubectl apply -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: csi.sim.kcm.dev}
spec: {attachRequired: true}
YAML
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {accessModes: [ReadWriteOnce], storageClassName: "", volumeName: $NS-pv, resources: {requests: {storage: 1Gi}}}
YAML
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $NS-pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  csi: {driver: csi.sim.kcm.dev, volumeHandle: attachdetach-handle}
  claimRef: {namespace: $NS, name: data, uid: $(uid pvc/data)}
YAML
settle pvc/data '{.status.phase}' Bound
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: user}
spec:
  nodeName: sim-node-0
  containers: [{name: c, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
YAML
settle pod/user '{.status.phase}' Running
va="csi-$(printf '%s' attachdetach-handle csi.sim.kcm.dev sim-node-0 | sha256sum | cut -d' ' -f1)"
capture attachment volumeattachment "$va"
# The node's volumesAttached while the pod runs, kept in a ConfigMap to be compared.
k create configmap attached --from-literal=volumesAttached="$(kubectl get node sim-node-0 -o 'jsonpath={.status.volumesAttached}')" >/dev/null
k delete pod user --wait=false >/dev/null
poll 90 eval '[ -z "$(kubectl get volumeattachment "$va" --ignore-not-found -o name)" ]'
