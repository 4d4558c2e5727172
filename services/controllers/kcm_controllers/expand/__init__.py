"""The persistentvolume-expander controller."""
