from topology.cli import app

app()
