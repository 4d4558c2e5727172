# ResourceQuota: a quota of 2 pods, 4 ConfigMaps and one Deployment; a Deployment of 3 gets 2 pods
# and its ReplicaSet's FailedCreate Events; a ConfigMap over the quota is refused. Shows the
# quota's status.used and the Deployment's ReplicaFailure condition.
k create quota q --hard=pods=2,configmaps=4,count/deployments.apps=1
settle resourcequota/q '{.status.used.configmaps}' 1
k create deployment web --image=nginx --replicas=3
settle resourcequota/q '{.status.used.pods}' 2
settle deployment/web '{.status.readyReplicas}' 2
settle_condition deployment/web ReplicaFailure
k create configmap a
k create configmap b
k create configmap c
! k create configmap d 2>/dev/null
settle resourcequota/q '{.status.used.configmaps}' 4
