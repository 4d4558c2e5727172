# ServiceAccount: the namespace's `default` account, deleted, is made again; another is left alone.
# Shows the accounts there are at the end.
k create serviceaccount app
k delete serviceaccount default
present serviceaccount/default
