"""ResourceQuota accounting shared by the resourcequota controller and the API server's quota
admission: `quantity` (parse and print resource quantities), `resources` (arithmetic over
resource lists), `views` (the object fields quota reads), `evaluators` (what each object
costs, scopes, usage totals) and `admission` (whether a write fits and what it charges).
One module for both, as upstream shares pkg/quota/v1, so the two never disagree.
"""
