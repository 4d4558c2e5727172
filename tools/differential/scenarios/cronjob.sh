# CronJob every minute: waits (up to two minutes) for its first Job to complete, then suspends it.
# Shows the Job it made (named by the schedule time, masked), the CronJob's status and Events.
k apply -f - <<YAML
apiVersion: batch/v1
kind: CronJob
metadata: {name: cron}
spec:
  schedule: "* * * * *"
  successfulJobsHistoryLimit: 1
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox, command: [date]}]
YAML
until_set cronjob/cron '{.status.lastSuccessfulTime}' 150
k patch cronjob/cron --type=merge -p '{"spec":{"suspend":true}}'
until_unset cronjob/cron '{.status.active}' 60
