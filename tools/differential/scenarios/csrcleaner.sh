# CSR cleaner: upstream's deadlines (an hour after approval with a certificate, denial or failure;
# a day pending; at once for an expired certificate) are longer than a run, and a certificate
# cannot be backdated with openssl here: this shows that pending, denied and approved CSRs within
# their deadlines are kept (tests/e2e/test_certificates.py deletes one with an expired certificate).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
csr_request "$work/x" "/CN=kept"
for name in pending denied approved; do csr_apply "$NS-$name" example.com/signer '["client auth"]' "$work/x"; done
kubectl certificate deny "$NS-denied" >/dev/null
kubectl certificate approve "$NS-approved" >/dev/null
for name in pending denied approved; do present "csr/$NS-$name" 10; done
for name in pending denied approved; do capture "csr-$name" csr "$NS-$name"; done
