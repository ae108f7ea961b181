import time
from tauopt import ApiError, Client

def suggest_with_backoff(client, exp_id, deadline_s):
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return client.suggest(exp_id)
        except ApiError as e:
            if e.status_code != 429:
                raise
            wait = e.retry_after or (0.5 if e.error_type == "bandwidth_full" else 5.0)
            if time.monotonic() + wait > deadline:
                raise RuntimeError(f"gave up on {e.error_type} after {deadline_s} s") from e
            time.sleep(wait)

client = Client(driver="local")
exp = client.create_experiment(
    name="one-slot",
    parameters=[{"name": "x", "type": "double", "bounds": (0.0, 1.0)}],
    metric={"name": "y", "objective": "minimize"},
    parallel_bandwidth=1,
)
held = client.suggest(exp.id)
try:
    client.suggest(exp.id)
except ApiError as e:
    print(e.status_code, e.error_type, "-", e.message)
    print("retry_after:", e.retry_after, "headers:", dict(e.headers))
try:
    suggest_with_backoff(client, exp.id, deadline_s=1.0)
except RuntimeError as e:
    print(e, "| cause:", e.__cause__.error_type)
client.observe(exp.id, suggestion_id=held.id, value=0.5)
print("after observe:", suggest_with_backoff(client, exp.id, deadline_s=1.0).state)
