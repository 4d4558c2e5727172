# Endpoints: a Service with two ports over pods whose named port differs (two subsets), one of
# them not ready; then a pod deleted. Shows the Endpoints (subsets, ports and their order,
# notReadyAddresses, the last-change-trigger-time annotation masked).
pod() {
  k apply -f - <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
  labels: {app: web}
  annotations: {sim.kcm.dev/ready: "$3", sim.kcm.dev/terminate-seconds: "0"}
spec:
  containers: [{name: c, image: nginx, ports: [{name: http, containerPort: $2}, {name: metrics, containerPort: 9090}]}]
YAML
}
pod p1 8080 true
pod p2 8080 true
pod p3 8081 true
pod p4 8080 false
k apply -f - <<YAML
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: metrics, port: 9090, targetPort: metrics}, {name: http, port: 80, targetPort: http}]
YAML
until_words 4 60 endpoints web -o 'jsonpath={.subsets[*].addresses[*].ip} {.subsets[*].notReadyAddresses[*].ip}'
k delete pod p2
until_words 3 60 endpoints web -o 'jsonpath={.subsets[*].addresses[*].ip} {.subsets[*].notReadyAddresses[*].ip}'
