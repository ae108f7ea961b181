"""Thin translators from other libraries onto tauopt's public client.

- `tauopt.integrations.optuna.TauoptSampler`: an Optuna sampler that asks tauopt.

Each module imports its library when it is imported; `import tauopt` imports none.
"""
