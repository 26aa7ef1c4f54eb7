"""What the command-line entry points share: the ``cli`` wrapper (one-line errors, exit codes, Ctrl-C), argparse
helpers, and the ``list`` command's listing."""
