"""The PersistentVolumeClaim protection controller."""
