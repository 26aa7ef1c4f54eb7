"""``python -m raydistill.evaluate``: the command lives in ``raydistill/commands/evaluate.py``;
this module keeps the name users type (a shim: the one import from above a stage that the architecture test allows)."""

from raydistill.commands.evaluate import main

if __name__ == "__main__":
    main()
