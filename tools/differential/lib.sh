# Sourced before every differential scenario (tools/differential/play.py runs them with bash -eu).
# The scenario gets: NS, its namespace, created and empty (with what the controllers put in every
# namespace); KUBECONFIG, the admin's; CAPTURES, a folder for `capture`. Everything it does is
# kubectl, and every wait is a condition with a timeout, never a sleep.

# kubectl in the scenario's namespace.
k() { kubectl --namespace "$NS" "$@"; }

# settle RESOURCE JSONPATH VALUE [SECONDS]: until the jsonpath of RESOURCE reads VALUE.
settle() { k wait "$1" --for="jsonpath=$2=$3" --timeout="${4:-90}s" >/dev/null; }

# settle_condition RESOURCE CONDITION [SECONDS]: until RESOURCE has the condition (True).
settle_condition() { k wait "$1" --for="condition=$2" --timeout="${3:-90}s" >/dev/null; }

# gone RESOURCE [SECONDS]: until RESOURCE no longer exists.
gone() { k wait "$1" --for=delete --timeout="${2:-90}s" >/dev/null 2>&1 || ! k get "$1" >/dev/null 2>&1; }

# present RESOURCE [SECONDS]: until RESOURCE exists.
present() { k wait "$1" --for=create --timeout="${2:-90}s" >/dev/null; }

# capture NAME KUBECTL-GET-ARGS...: what the scenario wants compared besides its namespace's final
# state (a cluster-scoped object, a state the scenario moves on from); compared by NAME.
capture() { local name=$1; shift; kubectl get "$@" -o json >"$CAPTURES/$name.json"; }

# uid RESOURCE: its metadata.uid, for hand-written ownerReferences.
uid() { k get "$1" -o 'jsonpath={.metadata.uid}'; }

# poll SECONDS COMMAND...: until COMMAND succeeds, tried every half second; fails after SECONDS.
poll() {
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || { echo "timed out waiting for: $*" >&2; return 1; }
    sleep 0.5
  done
}
_set() { [ -n "$(k get "$1" -o "jsonpath=$2")" ]; }
_unset() { [ -z "$(k get "$1" -o "jsonpath=$2")" ]; }
_none() { [ -z "$(k get "$@" -o name)" ]; }
_words() { local n=$1; shift; [ "$(k get "$@" | tr -s ' ' '\n' | sort -u | grep -c .)" -eq "$n" ]; }

# until_set RESOURCE JSONPATH [SECONDS] / until_unset ...: until the jsonpath reads something / nothing.
until_set() { poll "${3:-90}" _set "$1" "$2"; }
until_unset() { poll "${3:-90}" _unset "$1" "$2"; }
# until_none SECONDS KUBECTL-GET-ARGS...: until the selection is empty.
until_none() { local s=$1; shift; poll "$s" _none "$@"; }
# until_words N SECONDS KUBECTL-GET-ARGS...: until kubectl get prints N distinct words (of a jsonpath).
until_words() { local n=$1 s=$2; shift 2; poll "$s" _words "$n" "$@"; }

# csr_request FILE SUBJECT: a new EC key (FILE.key) and a PEM certificate request (FILE.csr).
csr_request() {
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" \
    -subj "$2" -out "$1.csr" 2>/dev/null
}

# csr_apply NAME SIGNER USAGES-JSON FILE [EXPIRATION-SECONDS]: a CertificateSigningRequest of FILE.csr.
csr_apply() {
  local expiration=""
  [ -n "${5:-}" ] && expiration="expirationSeconds: $5"
  kubectl apply -f - >/dev/null <<YAML
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: $1}
spec:
  request: $(base64 -w0 <"$4.csr")
  signerName: $2
  usages: $3
  $expiration
YAML
}

# b64url: stdin as base64url without padding (JWS).
b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }

# token_id: 6 characters of [a-z0-9] of this scenario's own (both sides share kube-system).
token_id() { printf '%s%s' "$NS" "$1" | md5sum | cut -c1-6; }
