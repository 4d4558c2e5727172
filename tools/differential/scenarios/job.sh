# Job: one that completes (3 completions, 2 at a time), one that fails past its backoffLimit, one
# Indexed Job. Shows the Jobs' status, conditions and Events, and the pods' finalizers.
k apply -f - <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: ok}
spec:
  completions: 3
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, command: [date]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: fails}
spec:
  backoffLimit: 1
  template:
    metadata: {annotations: {sim.kcm.dev/exit-code: "1"}}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: indexed}
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, command: [date]}]
YAML
settle_condition job/ok Complete
settle_condition job/fails Failed
settle_condition job/indexed Complete
