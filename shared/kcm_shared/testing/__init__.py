"""Layer 9, the testing kit: fakes a controller's tests are written with (upstream's fake
clientset, informer indexers and fake clock are the model). Import the modules:

- `fakeclient`: `FakeClient`, a `KubeClient` answering from objects held by path, recording
  every call as an `Action` and failing the calls a test names; upstream's API errors.
- `caches`: a `runtime.cache.Cache` filled by hand (`new`, `deliver`), no bus.
- `clock`: `FakeClock`, monotonic and wall time that move when the test says, with calls
  scheduled for later.
- `recorders`: `RecordingEventRecorder` and `RecordingPodControl`.
- `patching`: the merge and strategic merge patches `FakeClient` applies.

Nothing outside tests (and `kcm_shared.testing` itself) imports this layer.
"""
