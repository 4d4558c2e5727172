"""`kcm sim`: a kubelet and scheduler stand-in that makes a bare API server look like a cluster."""
