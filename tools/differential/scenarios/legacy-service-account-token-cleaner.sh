# Legacy ServiceAccount token cleaner: it labels, then deletes, legacy token Secrets unused for a
# year (--legacy-service-account-token-clean-up-period, at least a day), so a short run can only
# show that a fresh token, used once, is left alone. Shows the Secret's labels (the last-used date
# is kube-apiserver's).
k create serviceaccount old
k apply -f - <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: old-token
  annotations: {kubernetes.io/service-account.name: old}
type: kubernetes.io/service-account-token
YAML
until_set secret/old-token '{.data.token}'
token=$(k get secret old-token -o 'jsonpath={.data.token}' | base64 -d)
server=$(kubectl config view --minify -o 'jsonpath={.clusters[0].cluster.server}')
curl -sk -o /dev/null -H "Authorization: Bearer $token" "$server/api/v1/namespaces/$NS/serviceaccounts/old"
until_set secret/old-token '{.metadata.labels}' 60
