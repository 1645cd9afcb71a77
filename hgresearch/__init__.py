"""hgresearch: measurement and analysis toolkit for heterogeneous-GPU LLM inference.

Data flows one way: raw results -> runs/requests tables (:mod:`hgresearch.ingest`,
:mod:`hgresearch.runfolder`) -> costs/energy/carbon -> models and simulator -> figures and
tables. See README.md (its layout table lists the modules by layer) and docs/.
"""

__version__ = "0.1.0"
