# CSR signing: a kube-apiserver-client CSR approved with kubectl is signed by the cluster CA; one
# whose usages its signer refuses is Failed (SignerValidationFailure); a CSR for another signer
# stays pending though approved. Shows the CSRs (cluster-scoped: captured), each certificate's
# subject, issuer, lifetime and extensions read back by openssl into an annotation.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
csr_request "$work/alice" "/O=devs/CN=alice"
csr_apply "$NS-client" kubernetes.io/kube-apiserver-client '["client auth"]' "$work/alice" 3600
csr_request "$work/bob" "/CN=bob"
csr_apply "$NS-refused" kubernetes.io/kube-apiserver-client '["client auth", "server auth"]' "$work/bob"
csr_apply "$NS-other" example.com/signer '["client auth"]' "$work/bob"
kubectl certificate approve "$NS-client" "$NS-refused" "$NS-other" >/dev/null
_issued() { [ -n "$(kubectl get csr "$1" -o 'jsonpath={.status.certificate}')" ]; }
_failed() { [ -n "$(kubectl get csr "$1" -o 'jsonpath={.status.conditions[?(@.type=="Failed")].reason}')" ]; }
poll 60 _issued "$NS-client"
poll 60 _failed "$NS-refused"
# What is in the certificate (its bytes differ by nature: a new key, serial and signing time).
kubectl get csr "$NS-client" -o 'jsonpath={.status.certificate}' | base64 -d >"$work/client.crt"
read_cert() { openssl x509 -in "$work/client.crt" -noout "$@"; }
start=$(date -d "$(read_cert -startdate | cut -d= -f2)" +%s)
end=$(date -d "$(read_cert -enddate | cut -d= -f2)" +%s)
ext=$(read_cert -ext basicConstraints,keyUsage,extendedKeyUsage 2>/dev/null | tr -s ' \n' ' ')
summary="$(read_cert -subject -nameopt RFC2253); $(read_cert -issuer -nameopt RFC2253); $((end - start))s; $ext"
kubectl annotate csr "$NS-client" --overwrite "differential/certificate=$summary" >/dev/null
for name in client refused other; do capture "csr-$name" csr "$NS-$name"; done
