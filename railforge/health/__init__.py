"""Keep the cluster healthy from the plan: the remediation receiver for Alertmanager (drain, escalate, work
order, resume) and the node health check. Both read only the plan (plan.json) and what they are told."""
