"""The Optuna door: Optuna's gRPC `StorageService` (optuna.storages.GrpcStorageProxy's
protocol) over the engine, so unmodified Optuna programs store their studies in tauopt.

- `_generated/`: the `.proto` of the pinned Optuna (5.0.0) and its gencode (`make grpc-stubs`);
- `_servicer.py`: each call translated to one engine call; errors through the catalogue;
- `_door.py`: the gRPC server on an engine another command owns (`tauopt serve --optuna-port`);
- `_cli.py`: the `--optuna-*` options of `tauopt serve`.

Embedding: inside a task group, `await serve_optuna(tg, engine, OptunaDoor(port=0, owner="name"))`
serves the door on an entered Engine and returns ({"optuna_port": bound, ...}, stop).

Studies and trials live in the engine (`tauopt.engine._trials`, held by each
experiment's actor), never here.
"""

from ._door import OptunaDoor, serve_optuna

__all__ = ["OptunaDoor", "serve_optuna"]
