# Root CA publisher: kube-root-ca.crt, overwritten, is put right; deleted, is made again.
# Shows the ConfigMap at the end (its data is the cluster's CA, the same on both sides).
k patch configmap kube-root-ca.crt --type=merge -p '{"data":{"ca.crt":"tampered"}}'
_restored() { [ "$(k get configmap kube-root-ca.crt -o "jsonpath={.data.ca\.crt}")" != tampered ]; }
poll 60 _restored
k delete configmap kube-root-ca.crt
present configmap/kube-root-ca.crt
