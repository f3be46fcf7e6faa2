"""One copy of the newest parameters per host, in shared memory, guarded by a seqlock.

The learner is the only writer: `publish` bumps a sequence counter to odd, copies the flat parameter vector,
then sets the version and bumps the counter to even. Actors read without any lock: they copy, and retry if
the counter moved or was odd. A reader killed mid-read therefore can never block the learner (a lock held
by a SIGKILLed actor would), and actors copy only when the version moved (Menger's parameter cache).
"""
from __future__ import annotations

import time

import torch
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters


def views_of(flat: torch.Tensor, params: list[torch.Tensor]) -> list[torch.Tensor]:
    """Views of the 1-D `flat` shaped as `params`, one after another (the layout of parameters_to_vector)."""
    views, offset = [], 0
    for p in params:
        views.append(flat[offset:offset + p.numel()].view(p.shape))
        offset += p.numel()
    return views


class SharedParameters:
    def __init__(self, module: nn.Module, shared: bool = True):
        n = sum(p.numel() for p in module.parameters())
        self.flat = torch.zeros(n, dtype=torch.float32)
        self._control = torch.zeros(2, dtype=torch.int64)  # [sequence, version]
        if shared:
            self.flat.share_memory_()
            self._control.share_memory_()
        self.reads = 0
        self._shapes: tuple | None = None  # of the module last published: `_views` of `flat` fit them
        self._views: list[torch.Tensor] = []

    @property
    def nbytes(self) -> int:
        return self.flat.numel() * self.flat.element_size()

    def version(self) -> int:
        return int(self._control[1])

    def _views_of(self, flat: torch.Tensor, params: list[torch.Tensor]) -> list[torch.Tensor] | None:
        """Views of `flat` shaped as `params`, in order (cached for `self.flat`), or None when the parameters are
        not all float32 on the CPU (they then go through one flat vector)."""
        if any(p.device.type != "cpu" or p.dtype != torch.float32 for p in params):
            return None
        shapes = tuple(p.shape for p in params)
        if flat is self.flat and shapes == self._shapes:
            return self._views
        views = views_of(flat, params)
        if flat is self.flat:
            self._shapes, self._views = shapes, views
        return views

    def publish(self, module: nn.Module, version: int) -> None:
        params = [p.detach() for p in module.parameters()]
        views = self._views_of(self.flat, params)  # one fused copy of every tensor, no flat vector in between
        if views is None:  # another dtype or device: one vector, made before the write begins
            views, params = [self.flat], [parameters_to_vector(params).to("cpu", torch.float32)]
        control = self._control.numpy()  # a view: NumPy's scalar writes cost less than torch's indexing
        control[0] += 1
        torch._foreach_copy_(views, params)
        control[1] = version
        control[0] += 1

    def read_into(self, module: nn.Module, timeout_s: float = 10.0) -> int:
        """Copy the newest parameters into `module`; returns their version."""
        deadline = time.monotonic() + timeout_s
        local = torch.empty_like(self.flat)
        while True:
            before = int(self._control[0])
            if before % 2 == 0:
                local.copy_(self.flat)
                version = int(self._control[1])
                if int(self._control[0]) == before:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("parameter read kept racing the learner's writes for %.0f s" % timeout_s)
            time.sleep(0)
        with torch.no_grad():
            params = list(module.parameters())
            views = self._views_of(local, params)
            if views is not None:
                torch._foreach_copy_(params, views)
            else:
                vector_to_parameters(local, params)
        self.reads += 1
        return version
