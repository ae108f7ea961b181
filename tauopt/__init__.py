"""tauopt: a self-hostable coordination engine for hyperparameter search.

Importing tauopt loads no torch, gpytorch, grpc or aiosqlite: the thin
clients stay light on compute nodes.
"""

from .client import AsyncClient, Client
from .engine import Engine
from .errors import ApiError
from .models import (
    Condition,
    Experiment,
    Metric,
    Observation,
    Parameter,
    Report,
    ReportDecision,
    StrategyOptions,
    Suggestion,
)

__all__ = [
    "ApiError",
    "AsyncClient",
    "Client",
    "Condition",
    "Engine",
    "Experiment",
    "Metric",
    "Observation",
    "Parameter",
    "Report",
    "ReportDecision",
    "StrategyOptions",
    "Suggestion",
]

__version__ = "0.1.0"
