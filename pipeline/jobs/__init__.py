"""Example pipelines (odradek.pipeline.jobs)."""
