"""The integrations are optional: `import tauopt` (and `tauopt.integrations`, whose
shared part is library-free) loads no training library; each submodule loads its own."""

from __future__ import annotations

import subprocess
import sys


def test_import_tauopt_and_its_integrations_package_loads_no_training_library() -> None:
    code = (
        "import sys, tauopt, tauopt.integrations\n"
        "print([m for m in ('ray', 'keras', 'lightning', 'torch', 'optuna') if m in sys.modules])\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
