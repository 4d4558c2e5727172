"""The persistentvolume-binder-controller: binds claims to volumes and hands provisioning on."""
