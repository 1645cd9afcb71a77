"""Accounting: cost, energy and carbon of runs, and the server-versus-client cross-checks."""
