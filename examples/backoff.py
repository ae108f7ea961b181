import time
from tauopt import ApiError, Client, Suggestion

class GaveUp(RuntimeError):
    """The deadline passed; `refusal` is the last ApiError the daemon answered."""

    def __init__(self, refusal: ApiError, deadline_s: float) -> None:
        super().__init__(f"gave up on {refusal.error_type} after {deadline_s} s")
        self.refusal = refusal

def suggest_with_backoff(client: Client, exp_id: str, deadline_s: float) -> Suggestion:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return client.suggest(exp_id)
        except ApiError as e:
            if e.status_code != 429:
                raise
            wait = e.retry_after or (0.5 if e.error_type == "bandwidth_full" else 5.0)
            if time.monotonic() + wait > deadline:
                raise GaveUp(e, deadline_s) from e
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
except GaveUp as e:
    print(e, "| cause:", e.refusal.error_type)
client.observe(exp.id, suggestion_id=held.id, value=0.5)
print("after observe:", suggest_with_backoff(client, exp.id, deadline_s=1.0).state)
