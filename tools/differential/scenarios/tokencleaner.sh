# Token cleaner: an expired bootstrap token Secret is deleted, one expiring in an hour is kept.
# The verdicts are written to a ConfigMap of the namespace (each side's token ids are its own).
expired=$(token_id expired)
later=$(token_id later)
token() {  # token ID EXPIRATION
  kubectl -n kube-system create secret generic "bootstrap-token-$1" --type=bootstrap.kubernetes.io/token \
    --from-literal=token-id="$1" --from-literal=token-secret=0123456789abcdef \
    --from-literal=expiration="$2" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
}
token "$expired" "$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)"
token "$later" "$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)"
_deleted() { ! kubectl -n kube-system get secret "bootstrap-token-$expired" >/dev/null 2>&1; }
poll 60 _deleted
kept=no
kubectl -n kube-system get secret "bootstrap-token-$later" >/dev/null 2>&1 && kept=yes
k create configmap verdicts --from-literal=expired-deleted=yes --from-literal=later-kept=$kept >/dev/null
kubectl -n kube-system delete secret "bootstrap-token-$later" >/dev/null
