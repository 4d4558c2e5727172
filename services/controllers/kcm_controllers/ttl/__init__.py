"""The ttl-controller: see `controller.py`."""
