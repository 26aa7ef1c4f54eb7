"""MLflow: runs, metrics, params, artifacts, datasets, a sweep's parent and child runs. Plain Python, no Ray."""
