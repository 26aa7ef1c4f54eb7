"""``python -m raydistill.data``: the command lives in ``raydistill/commands/data.py``;
this module keeps the name users type (a shim: the one import from above a stage that the architecture test allows)."""

from raydistill.commands.data import main

if __name__ == "__main__":
    raise SystemExit(main())
