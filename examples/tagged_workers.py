from tauopt import Client

client = Client(driver="local")
exp = client.create_experiment(
    name="tagged-workers",
    parameters=[{"name": "x", "type": "double", "bounds": (0.0, 1.0)}],
    metric={"name": "y", "objective": "minimize"},
    parallel_bandwidth=2,
)
mine = client.suggest(exp.id, tag="worker-1")
other = client.suggest(exp.id, tag="worker-2")
open_mine = client.suggestions(exp.id, state="open", tag="worker-1")
assert [s.id for s in open_mine] == [mine.id] and open_mine[0].tag == "worker-1"
recovered = open_mine[0]
client.observe(exp.id, suggestion_id=recovered.id, value=0.5)
assert client.suggestions(exp.id, state="open", tag="worker-1") == []
print(recovered.tag, len(client.suggestions(exp.id, state="open")))
