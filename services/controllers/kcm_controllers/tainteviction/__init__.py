"""The taint-eviction-controller: see `controller.py`."""
