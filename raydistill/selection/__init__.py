"""Which run is best, every rule in one room: a run's best epoch (``epoch.best_epoch``, which the loop applies every
epoch), the sweep's best trial, its confirmation and ``raydistill best``'s pick (``runs``), and the ``search``
section's settings of what chooses (``settings``). Below ``train/``: it imports only ``common/`` and ``tracking/``."""
