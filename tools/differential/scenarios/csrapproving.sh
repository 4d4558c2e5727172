# CSR approving: a kubelet client CSR filed with a bootstrap token (a kubelet's TLS bootstrap) is
# auto-approved after a SubjectAccessReview and then signed; a kube-apiserver-client CSR filed by
# the same user is left pending. Shows the CSRs (cluster-scoped: captured).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
id=$(token_id approving)
kubectl -n kube-system create secret generic "bootstrap-token-$id" --type=bootstrap.kubernetes.io/token \
  --from-literal=token-id="$id" --from-literal=token-secret=0123456789abcdef \
  --from-literal=usage-bootstrap-authentication=true --dry-run=client -o yaml | kubectl apply -f - >/dev/null
for role in system:node-bootstrapper system:certificates.k8s.io:certificatesigningrequests:nodeclient; do
  kubectl create clusterrolebinding "differential-${role//:/-}" --clusterrole="$role" --group=system:bootstrappers \
    --dry-run=client -o yaml | kubectl apply -f - >/dev/null
done
server=$(kubectl config view --minify -o 'jsonpath={.clusters[0].cluster.server}')
kubectl config view --minify --raw -o 'jsonpath={.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$work/ca.crt"
as_bootstrap() {  # kubectl as the bootstrap token's user, not the admin: the approver asks about the requester
  KUBECONFIG=/dev/null kubectl --server "$server" --certificate-authority "$work/ca.crt" \
    --token "$id.0123456789abcdef" "$@"
}
file() {  # file NAME SIGNER USAGES FILE
  as_bootstrap apply -f - >/dev/null <<YAML
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: $1}
spec:
  request: $(base64 -w0 <"$4.csr")
  signerName: $2
  usages: $3
YAML
}
csr_request "$work/node" "/O=system:nodes/CN=system:node:$NS-worker"
poll 30 file "$NS-node" kubernetes.io/kube-apiserver-client-kubelet '[digital signature, client auth]' "$work/node"
csr_request "$work/client" "/CN=someone"
file "$NS-client" kubernetes.io/kube-apiserver-client '[client auth]' "$work/client"
_issued() { [ -n "$(kubectl get csr "$1" -o 'jsonpath={.status.certificate}')" ]; }
poll 60 _issued "$NS-node"
kubectl get csr "$NS-node" -o 'jsonpath={.status.certificate}' | base64 -d >"$work/node.crt"
subject=$(openssl x509 -in "$work/node.crt" -noout -subject -nameopt RFC2253)
kubectl annotate csr "$NS-node" --overwrite "differential/subject=$subject" >/dev/null
for name in node client; do capture "csr-$name" csr "$NS-$name"; done
