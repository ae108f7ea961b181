"""Put on a Dask worker's PYTHONPATH by tests/test_compute_dask.py: this worker
cannot import gpytorch, as on a machine where the `tauopt[gp]` extra is missing."""

import sys


class _HideGpytorch:
    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name == "gpytorch" or name.startswith("gpytorch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _HideGpytorch())
