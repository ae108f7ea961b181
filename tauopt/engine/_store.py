"""Transitional re-export: the stores moved to `tauopt.store`. Kept only while
the HTTP door (tauopt/transport/http, owned elsewhere) still imports from here."""

from ..store import *  # noqa: F401,F403
from ..store import __all__  # noqa: F401
