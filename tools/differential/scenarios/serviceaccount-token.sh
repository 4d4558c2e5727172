# ServiceAccount token: a legacy token Secret is filled (token masked, ca.crt, namespace) and
# deleted with its account; one naming an account that does not exist is deleted. Shows the filled
# Secret (captured) and what is left.
k create serviceaccount bot
k apply -f - <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: bot-token
  annotations: {kubernetes.io/service-account.name: bot}
type: kubernetes.io/service-account-token
---
apiVersion: v1
kind: Secret
metadata:
  name: nobody-token
  annotations: {kubernetes.io/service-account.name: nobody}
type: kubernetes.io/service-account-token
YAML
until_set secret/bot-token '{.data.token}'
capture filled -n "$NS" secret bot-token
gone secret/nobody-token
k delete serviceaccount bot
gone secret/bot-token
