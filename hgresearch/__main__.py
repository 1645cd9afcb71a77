from hgresearch.cli import app

app()
