# Attach/detach: a pod on a node using a CSI volume of an attachable driver (csi.sim.kcm.dev,
# whose attacher the simulator plays) gets a VolumeAttachment under upstream's name, attached
# before the pod runs (SuccessfulAttachVolume on the pod); the pod deleted, the volume is
# detached and the attachment goes. The claim and the PV are bound by hand, completely (the
# claim's bind-completed annotation, the PV's claimRef with the claim's uid, both phases Bound),
# so the PV binder finds nothing to do once the PV exists. Both sides play on one cluster, one
# after the other: the PV is named after the namespace, since the first side's PV stays bound to
# that side's claim and a second side's claim naming it would be misbound (ClaimMisbound, as
# upstream's binder says). The pod names its node and the volume handle is fixed (the first
# side's attachment is gone before the second side plays), so the attachment's name (a hash of
# handle, driver and node) is the same on both sides.
kubectl apply -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: csi.sim.kcm.dev}
spec: {attachRequired: true}
YAML
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  annotations: {pv.kubernetes.io/bind-completed: "yes"}
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
kubectl patch pv "$NS-pv" --subresource=status --type=merge -p '{"status":{"phase":"Bound"}}' >/dev/null
bound='{"status":{"phase":"Bound","accessModes":["ReadWriteOnce"],"capacity":{"storage":"1Gi"}}}'
k patch pvc data --subresource=status --type=merge -p "$bound" >/dev/null
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
