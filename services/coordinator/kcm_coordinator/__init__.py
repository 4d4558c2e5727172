"""The coordinator: leader lease, membership of controller replicas, partition ownership, health."""
