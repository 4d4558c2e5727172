# TTL after finished: a Job with ttlSecondsAfterFinished 2 is deleted with its pods once it
# completes; one with a TTL of an hour stays. Shows what is left.
k apply -f - <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: short}
spec:
  ttlSecondsAfterFinished: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, command: [date]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: long}
spec:
  ttlSecondsAfterFinished: 3600
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, command: [date]}]
YAML
settle_condition job/long Complete
gone job/short 90
until_none 60 pods -l batch.kubernetes.io/job-name=short
