"""``python -m raydistill.distill.augment``: the command lives in ``raydistill/commands/augment.py``;
this module keeps the name users type (a shim: the one import from above a stage that the architecture test allows)."""

from raydistill.commands.augment import main

if __name__ == "__main__":
    main()
