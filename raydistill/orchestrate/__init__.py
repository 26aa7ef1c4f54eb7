"""Ray glue, and the only Ray imports: ``connect`` (join or start Ray), ``run`` (one distillation run on Ray Train),
``trial`` (one Tune trial = one run), ``search`` (Optuna TPE and ASHA as Tune sees them), ``tuner`` (a sweep's Tuner
and its live table). Everything they call is plain Python and PyTorch."""
