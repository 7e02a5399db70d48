"""Client quotas (Kafka's ClientQuotaManager family): the sampled rate every quota measures,
the quota configs and their resolution, the per-request throttle. See ``docs/internals.md``."""
