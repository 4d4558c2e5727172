# Bootstrap signer: a signing bootstrap token signs kube-public/cluster-info with a detached JWS
# that verifies as kubeadm verifies it (recomputed here with openssl); a token not for signing
# gets no signature; the signature goes when the token stops signing. The verdicts are written
# to a ConfigMap of the namespace (each side's token id is its own).
signer=$(token_id signer)
plain=$(token_id plain)
secret=0123456789abcdef
kubectl -n kube-public get configmap cluster-info >/dev/null 2>&1 ||
  kubectl -n kube-public create configmap cluster-info --from-literal=kubeconfig="apiVersion: v1
kind: Config
clusters: []
" >/dev/null
token() {  # token ID SIGNING
  kubectl -n kube-system create secret generic "bootstrap-token-$1" --type=bootstrap.kubernetes.io/token \
    --from-literal=token-id="$1" --from-literal=token-secret=$secret \
    --from-literal=usage-bootstrap-signing="$2" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
}
token "$plain" false
token "$signer" true
signature() { kubectl -n kube-public get configmap cluster-info -o "jsonpath={.data.jws-kubeconfig-$1}"; }
_signed() { [ -n "$(signature "$signer")" ]; }
poll 60 _signed
content=$(kubectl -n kube-public get configmap cluster-info -o 'jsonpath={.data.kubeconfig}')
header=$(printf '{"alg":"HS256","kid":"%s"}' "$signer" | b64url)
mac=$(printf '%s.%s' "$header" "$(printf '%s' "$content" | b64url)" | openssl dgst -sha256 -hmac $secret -binary | b64url)
verified=no
[ "$(signature "$signer")" = "$header..$mac" ] && verified=yes
plain_signed=no
[ -n "$(signature "$plain")" ] && plain_signed=yes
token "$signer" false
_unsigned() { [ -z "$(signature "$signer")" ]; }
poll 60 _unsigned
k create configmap verdicts --from-literal=verified=$verified --from-literal=plain-signed=$plain_signed \
  --from-literal=removed=yes >/dev/null
kubectl -n kube-system delete secret "bootstrap-token-$signer" "bootstrap-token-$plain" >/dev/null
