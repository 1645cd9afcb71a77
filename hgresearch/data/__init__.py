"""Data layer: the run folder's schema, result ingest, catalogs, the reference data and
run summaries (the runs and requests tables everything else reads)."""
