"""``python -m raydistill COMMAND`` (and the console command ``raydistill``): the dispatcher lives in
``raydistill/commands/dispatch.py``; this module keeps the name users type."""

from raydistill.commands.dispatch import main

if __name__ == "__main__":
    raise SystemExit(main())
