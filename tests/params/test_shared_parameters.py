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


def test_publish_copies_each_version_whatever_the_parameters_dtype():
    """CPU float32 parameters are copied tensor by tensor into views of the flat copy; others (here float64)
    through one flat vector. Either way a reader gets exactly the newest values, and a later publish overwrites."""
    for dtype in (torch.float32, torch.float64):
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)).to(dtype)
        server = SharedParameters(model, shared=False)
        for version in (1, 2):
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(float(version))
            server.publish(model, version)
            clone = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
            assert server.read_into(clone) == version and server.version() == version
            for a, b in zip(model.parameters(), clone.parameters()):
                assert torch.equal(a.float(), b)
        assert int(server._control[0]) == 4  # two writes, the sequence counter even after each
