"""Report layer: table writers, the paper's tables, the reproduction audit, figures and the
manuscript."""
