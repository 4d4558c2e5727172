"""The watcher: lists and watches the API server and publishes every object change to NATS."""
