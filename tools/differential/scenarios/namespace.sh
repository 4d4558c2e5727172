# Namespace: a namespace holding a ConfigMap with a finalizer and a Secret is deleted. Shows its
# status conditions while the finalizer holds it (captured), then that it goes once released.
kubectl create namespace "$NS-doomed"
kubectl -n "$NS-doomed" create configmap held
kubectl -n "$NS-doomed" patch configmap held --type=merge -p '{"metadata":{"finalizers":["example.com/hold"]}}'
kubectl -n "$NS-doomed" create secret generic s --from-literal=a=b
kubectl delete namespace "$NS-doomed" --wait=false
kubectl wait namespace "$NS-doomed" --for=condition=NamespaceFinalizersRemaining --timeout=90s >/dev/null
capture doomed namespace "$NS-doomed"
kubectl -n "$NS-doomed" patch configmap held --type=merge -p '{"metadata":{"finalizers":null}}'
kubectl wait namespace "$NS-doomed" --for=delete --timeout=90s >/dev/null 2>&1 || ! kubectl get namespace "$NS-doomed" >/dev/null 2>&1
