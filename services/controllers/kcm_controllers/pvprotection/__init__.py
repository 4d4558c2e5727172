"""The PersistentVolume protection controller."""
