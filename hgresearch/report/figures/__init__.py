"""One function per figure; all share :mod:`hgresearch.report.figures.style` and save
deterministically."""
