# EndpointSlice mirroring: a Service without a selector and Endpoints written by hand are mirrored
# into an EndpointSlice; then an address is added. Shows the mirrored slice.
k apply -f - <<YAML
apiVersion: v1
kind: Service
metadata: {name: ext}
spec:
  ports: [{name: https, port: 443}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: ext, labels: {team: a}}
subsets:
  - addresses: [{ip: 192.0.2.10}, {ip: 192.0.2.11}]
    notReadyAddresses: [{ip: 192.0.2.12}]
    ports: [{name: https, port: 8443}]
YAML
until_words 3 60 endpointslices -l kubernetes.io/service-name=ext -o 'jsonpath={range .items[*].endpoints[*]}{.addresses[0]} {end}'
k patch endpoints ext --type=json -p '[{"op":"add","path":"/subsets/0/addresses/-","value":{"ip":"192.0.2.13"}}]'
until_words 4 60 endpointslices -l kubernetes.io/service-name=ext -o 'jsonpath={range .items[*].endpoints[*]}{.addresses[0]} {end}'
