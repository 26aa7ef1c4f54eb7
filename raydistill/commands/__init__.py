"""Every command, one module each (``sweep``, ``distill``, ``finetune``, ``best``, ``evaluate``, ``data``, ``augment``,
``list``; ``dispatch``: ``raydistill COMMAND``), and what they share: the ``cli`` wrapper (one-line errors, exit codes,
Ctrl-C) and the argparse helpers. A command parses, checks, builds its config and calls the stage below; the module
names users type (``python -m raydistill.sweep``) are shims that call its ``main``."""
