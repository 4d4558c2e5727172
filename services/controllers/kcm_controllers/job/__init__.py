"""The job controller: runs a Job's pods to completion (upstream pkg/controller/job)."""
