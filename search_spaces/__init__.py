"""The named search spaces, one YAML each, installed as ``raydistill.search_spaces`` (pyproject's ``package-dir``)."""
