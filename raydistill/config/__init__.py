"""Where YAML and flags become a typed, validated run configuration: the frozen ``RunConfig`` and its sections
(``schema``), student sizes, the selection rules (what chooses and what reports), the published recipes and the search
spaces."""
