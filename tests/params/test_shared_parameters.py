"""The one copy of the newest parameters per host: versions, and copies only when the version moved."""
import torch

from menger.params import SharedParameters


def test_parameter_server_versions_and_copies():
    model = torch.nn.Linear(3, 2)
    server = SharedParameters(model, shared=False)
    server.publish(model, 7)
    clone = torch.nn.Linear(3, 2)
    assert server.read_into(clone) == 7 and server.version() == 7
    for a, b in zip(model.parameters(), clone.parameters()):
        assert torch.equal(a, b)
