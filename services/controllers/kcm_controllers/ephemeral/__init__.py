"""The ephemeral-volume controller."""
