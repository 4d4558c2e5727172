"""The attach/detach controller (persistentvolume-attach-detach-controller)."""
