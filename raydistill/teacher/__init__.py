"""Everything done with the teacher, in one room: fine-tuning it on gold labels (``fit.finetune``: the same loop the
students train with, reused by fingerprint, resumed by epoch; ``prepare_teacher`` for a sweep), the cache of its
outputs every trial reads (``cache``: handed to the loop by the launchers as ``Context.open_cache``, so train/ never
imports it) and scoring it as a sweep's yardstick (``reference``: its dev score, size and latency, the constant
answer's floor).

Two things a teacher shares with every model stay below, where the stages that need them can import them: loading an
encoder folder, its layout and fingerprint (``models/encoder.py``: students and exports are loaded through it too),
and reading a model folder's label names (``tasks/head.py``: the data is resolved with them, before a config
exists)."""
