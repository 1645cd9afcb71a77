"""One function per figure; all share :mod:`hgresearch.figures.style` and save deterministically."""
