# ValidatingAdmissionPolicy status: a policy whose expression checks and one with a misspelt field
# of a Deployment get observedGeneration and typeChecking; the first is then edited and its status
# follows the new generation. Shows both policies (captured; cluster-scoped, named after the
# namespace).
kubectl apply -f - <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: $NS-good}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]
  validations: [{expression: "object.spec.replicas <= 5"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: $NS-typo}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]
  validations: [{expression: "object.spec.replicaz <= 5"}]
YAML
_observed() { [ "$(kubectl get validatingadmissionpolicy "$1" -o 'jsonpath={.status.observedGeneration}')" = "$2" ]; }
poll 60 _observed "$NS-good" 1
poll 60 _observed "$NS-typo" 1
kubectl patch validatingadmissionpolicy "$NS-good" --type=merge -p '{"spec":{"validations":[{"expression":"object.spec.replicas <= 3"}]}}'
poll 60 _observed "$NS-good" 2
capture good validatingadmissionpolicy "$NS-good"
capture typo validatingadmissionpolicy "$NS-typo"
kubectl delete validatingadmissionpolicy "$NS-good" "$NS-typo"
