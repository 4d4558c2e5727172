# EndpointSlice: a Service over three pods, one not ready; then one pod deleted gracefully, whose
# endpoint turns terminating (captured) before it goes. Shows the slices (endpoints, conditions,
# ports, labels, managed-by).
pod() {
  k apply -f - <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
  labels: {app: web}
  annotations: {sim.kcm.dev/ready: "$2", sim.kcm.dev/terminate-seconds: "5"}
spec:
  terminationGracePeriodSeconds: 30
  containers: [{name: c, image: nginx, ports: [{name: http, containerPort: 8080}]}]
YAML
}
pod p1 true
pod p2 true
pod p3 false
k apply -f - <<YAML
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
YAML
until_words 3 60 endpointslices -l kubernetes.io/service-name=web -o 'jsonpath={range .items[*].endpoints[*]}{.targetRef.name} {end}'
k delete pod p1 --wait=false
_terminating() { k get endpointslices -l kubernetes.io/service-name=web -o 'jsonpath={.items[*].endpoints[*].conditions.terminating}' | grep -q true; }
poll 60 _terminating
capture terminating -n "$NS" endpointslices -l kubernetes.io/service-name=web
gone pod/p1
until_words 2 60 endpointslices -l kubernetes.io/service-name=web -o 'jsonpath={range .items[*].endpoints[*]}{.targetRef.name} {end}'
