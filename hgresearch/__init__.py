"""hgresearch: measurement and analysis toolkit for heterogeneous-GPU LLM inference.

Data flows one way: raw results -> runs/requests tables (:mod:`hgresearch.ingest`) ->
costs/energy -> models -> fleet -> figures. See README.md and docs/.
"""

__version__ = "0.1.0"
