"""``python -m raydistill.finetune``: the command lives in ``raydistill/commands/finetune.py``;
this module keeps the name users type (a shim: the one import from above a stage that the architecture test allows)."""

from raydistill.commands.finetune import main

if __name__ == "__main__":
    main()
