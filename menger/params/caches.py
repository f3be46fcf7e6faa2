"""Menger's parameter caches on Ray: a cache per node, and a tree of cell caches above them.

Imports Ray and numpy only (not torch), so a cache's process starts light; `menger.params.ray` holds the learner's
side (`RayParameterServer`) and the actor's (`CachedParameters`).

    one tier (runtime.ray.cache_fanout=0):  learner -> every node's cache -> its actors
    a tree   (runtime.ray.cache_fanout=F):  learner -> <= F cells -> ... -> <= F node caches each -> their actors

A node's cache and each cell is a `ParameterCache` in a `CacheProcess` (an async Ray actor, num_cpus=0).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any, cast

import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

log = logging.getLogger("menger.params.caches")

GET_TIMEOUT_S = 60.0  # bound of every fetch of an object that is known to be ready (or of a small control call)
NODE_KEY = "node"  # a node's cache in its process (a cell's key is its name)
PUSH_WAIT_S = 1.0  # a tree's node cache waits so long for an offered version to come down before pulling it
PULL_WAIT_S = 2.0  # ... and so long for the cache above to hand it over, before taking the learner's offer
ARRIVALS_KEPT = 256  # (version, time) a cache keeps of the versions it fetched: how fast they came down


def cell_groups(count: int, fanout: int) -> list[list[list[int]]]:
    """The tiers of cell caches above `count` node caches, each cache telling at most `fanout` below it.

    Tier by tier from the nodes up, each tier a list of cells, each cell the indices of its children in the tier
    below, until at most `fanout` caches are left for the learner to tell. `fanout` 0: no cells (the learner tells
    every node's cache). 300 nodes at fan-out 16: 19 cells, then 2 above them; the learner tells 2.
    """
    if fanout == 1:
        raise ValueError("a cache fan-out of 1 makes a chain, not a tree: give 0 or at least 2")
    tiers = []
    while fanout and count > fanout:
        tiers.append([list(range(first, min(first + fanout, count))) for first in range(0, count, fanout)])
        count = len(tiers[-1])
    return tiers


class ParameterCache:
    """One of Menger's parameter caches: a node's (its actors read it) or a cell's (caches below it fetch from it).
    Its methods are coroutines: a `CacheProcess` is an async Ray actor, so a read that waits for a version on its
    way down the tree holds up nothing else.

    `announce(version, source, origin)`: a version was published; `source[0]` is the object to fetch it from (the
    learner's, or the copy of the cache above: `origin` "learner" or "cache"). A lazy cache (the one-tier layout)
    only keeps the reference. A pushing cache (a tree) fetches the version at once, stores it in its node's object
    store with `ray.put`, and tells its children, so a version moves down the tree one tier at a time and the
    learner sends it to its children only.

    `read(version, source)`: an actor's read before an unroll; `version, source` is the learner's offer with the
    unroll call, which counts as an announcement too (a cache made after a publish has missed it). A lazy cache
    fetches the newest version known if it is not here yet. A pushing cache waits up to `PUSH_WAIT_S` for an
    offered version that has not come down the tree yet (`late`), then pulls it from the cache above (`serve`: that
    cache hands over its copy, pulling it from its own parent first if it lacks it; a top cell fetches the
    learner's offer), so a slow tree still costs the learner no more than its fan-out. Only a cache above that is
    dead, or has not answered in `PULL_WAIT_S`, sends the read to the learner's offer (`fallbacks`); its reads then
    wait no more until an announcement comes again (the driver reroutes it). A fetch from a cache above that died
    since it announced falls back to the offer too. So no actor acts on a version older than the one its unroll
    call carried, whatever happened above it, and none waits for it longer than `PUSH_WAIT_S + PULL_WAIT_S` plus
    one fetch.
    """

    def __init__(self, push: bool = False):
        self.push = push
        self.version, self.local, self.source = -1, cast(list, None), cast(list, None)
        self.announced, self.origin = -1, "learner"
        self.children: list[tuple[Any, str]] = []  # (the Ray actor holding a child cache, its key there)
        self.parent: tuple[Any, str] | None = None  # the same of the cache above (None: the learner's offer)
        self.fetches = {"learner": 0, "cache": 0}
        self.bytes_fetched = {"learner": 0, "cache": 0}
        self.reads, self.late, self.pulls, self.fallbacks, self.sends = 0, 0, 0, 0, 0
        self.cut_off = False  # the cache above failed a pull: reads stop waiting until the tree (or learner) tells
        self.arrivals: deque[tuple[int, float]] = deque(maxlen=ARRIVALS_KEPT)  # (version, when it was here)
        self._arrived = asyncio.Event()  # set (and replaced) whenever a newer version is here
        self._fetching = asyncio.Lock()  # one fetch at a time: reads and pushes that queue behind it find it done
        self._pulling = asyncio.Lock()  # one pull at a time: late reads that queue behind it find it done

    def adopt(self, children: list[tuple[Any, str]]) -> None:
        """The caches this one tells of each version (a tree's cell); the newest version here goes to them now."""
        self.children = list(children)
        if self.version >= 0:
            self._tell(self.children)

    def follow(self, parent: tuple[Any, str] | None) -> None:
        """The cache a late read pulls from (None: a top cache, whose pulls take the learner's offer)."""
        self.parent = parent

    async def announce(self, version: int, source: list, origin: str = "learner") -> None:
        self.cut_off = False  # told by the tier above (or the learner, rerouted): its pushes come again
        if self._note(version, source, origin) and self.push:
            await self._fetch(fallback=None)

    async def read(self, version: int, source: list) -> tuple[int, list]:
        if self.push and version > self.version and not self.cut_off:
            try:
                await asyncio.wait_for(self._reached(version), PUSH_WAIT_S)
            except asyncio.TimeoutError:
                self.late += 1
                await self._pull(version, source)
        self._note(version, source, "learner")
        await self._fetch(fallback=(version, source))
        self.reads += 1
        return self.version, self.local

    async def serve(self, version: int, source: list) -> tuple[int, list]:
        """A late child's pull: this cache's copy of `version` (or newer), brought here first if it is not."""
        if version > self.version:
            await self._pull(version, source)
            self._note(version, source, "learner")
            await self._fetch(fallback=(version, source))
        return self.version, self.local

    async def _pull(self, version: int, source: list) -> None:
        """Ask the cache above for `version` when its push has not come (one already announced is on its way);
        a cache above that is gone or slower than PULL_WAIT_S: the learner's offer (`source`) is fetched."""
        if self.parent is None or self.announced >= version:
            return
        async with self._pulling:
            if self.announced >= version or self.cut_off:  # a pull queued before this one brought it, or failed
                return
            process, key = self.parent
            try:
                pulled, local = await asyncio.wait_for(
                    asyncio.wrap_future(process.serve.remote(key, version, source).future()), PULL_WAIT_S)
            except (asyncio.TimeoutError, RayError):
                self.fallbacks += 1
                self.cut_off = True
                return
            self.pulls += 1
            self._note(pulled, local, "cache")

    def _note(self, version: int, source: list, origin: str) -> bool:
        if version <= self.announced:
            return False
        self.announced, self.source, self.origin = version, source, origin
        return True

    async def _reached(self, version: int) -> None:
        while self.version < version:
            await self._arrived.wait()

    async def _fetch(self, fallback: tuple[int, list] | None) -> None:
        if self.announced <= self.version:
            return
        async with self._fetching:  # a version announced while another is fetched: the newest, once, after it
            await self._fetch_newest(fallback)

    async def _fetch_newest(self, fallback: tuple[int, list] | None) -> None:
        if self.announced <= self.version:
            return
        version, source, origin = self.announced, self.source, self.origin
        try:
            flat = await _get(source[0])
        except RayError:
            if origin == "learner":
                raise
            if fallback is None or fallback[0] <= self.version:
                return  # a push from a cache that died since: an actor's read (or the rerouted tier) brings it
            self.fallbacks += 1  # the cache above is gone: the learner's offer (the driver reroutes this cache)
            version, source, origin = fallback[0], fallback[1], "learner"
            flat = await _get(source[0])
        self.fetches[origin] += 1
        self.bytes_fetched[origin] += int(flat.nbytes)
        self.local = [ray.put(flat)]
        self.version = version
        if self.source is source:
            self.source = cast(list, None)  # fetched: the object above may go
        self.arrivals.append((version, time.time()))
        self._arrived.set()
        self._arrived = asyncio.Event()
        self._tell(self.children)

    def _tell(self, children: list[tuple[Any, str]]) -> None:
        for process, key in children:
            process.announce.remote(key, self.version, self.local, "cache")
            self.sends += 1

    def stats(self) -> dict:
        return {"fetches": sum(self.fetches.values()), "fetches_from_learner": self.fetches["learner"],
                "bytes": sum(self.bytes_fetched.values()), "bytes_from_learner": self.bytes_fetched["learner"],
                "reads": self.reads, "late": self.late, "pulls": self.pulls, "fallbacks": self.fallbacks,
                "sends": self.sends, "version": self.version}


async def _get(ref):
    """The array behind `ref`, awaited (an async actor's event loop goes on meanwhile), bounded by GET_TIMEOUT_S."""
    return await asyncio.wait_for(asyncio.wrap_future(ref.future()), GET_TIMEOUT_S)


class CacheProcess:
    """The body of a cache's Ray actor (async, num_cpus=0): its caches by key. A run gives each its own process,
    one per node and one per cell; an emulation of many hosts (`benchmarks/scale.py`) packs several into one."""

    def __init__(self, keys: list[str], push: bool = False):
        self.caches = {key: ParameterCache(push) for key in keys}

    async def announce(self, key: str, version: int, source: list, origin: str = "learner") -> None:
        await self.caches[key].announce(version, source, origin)

    async def read(self, key: str, version: int, source: list) -> tuple[int, list]:
        return await self.caches[key].read(version, source)

    async def serve(self, key: str, version: int, source: list) -> tuple[int, list]:
        return await self.caches[key].serve(version, source)

    async def adopt(self, key: str, children: list[tuple[Any, str]]) -> None:
        self.caches[key].adopt(children)

    async def follow(self, key: str, parent: tuple[Any, str] | None) -> None:
        self.caches[key].follow(parent)

    async def stats(self) -> dict[str, dict]:
        return {key: cache.stats() for key, cache in self.caches.items()}

    async def arrivals(self) -> dict[str, list[tuple[int, float]]]:
        """(version, when it was here) of the last versions each cache fetched: how fast they came down."""
        return {key: list(cache.arrivals) for key, cache in self.caches.items()}


class ParameterCaches:
    """The caches of a run: one per live node (remade when nodes come and go), and with `fanout` >= 2 the cells
    of `cell_groups` above them, so that the learner tells at most `fanout` caches of each version.

        fanout 0:   learner -> every node's cache (lazy: a cache fetches a version when an actor first reads it)
        fanout F:   learner -> <= F cells -> ... -> <= F node caches each (every version pushed down the tree)

    A cell that dies (its node left, it was killed) is noticed at the next `stats()` (the trainer asks every
    log interval): its children are told by the cache above it from then on (the learner, for a top cell), and
    until then their actors' reads fall back to the learner's offer. The tree is built again when nodes change.
    """

    def __init__(self, fanout: int = 0):
        self.fanout = fanout
        self.by_node: dict[str, Any] = {}
        self.cells: dict[str, Any] = {}      # cell name -> its process
        self.parent: dict[str, str | None] = {}  # node id or cell name -> the cell above it (None: the learner)
        self.roots: list[str] = []              # what the learner tells
        self.asked: list = []       # stats calls in flight: answered by the next `stats()`, so it never blocks
        self.latest: dict = {}      # node id or cell name -> the newest stats of its cache
        self.version, self.source = -1, cast(list, None)  # the newest announcement, for caches made after it
        self.rerouted = 0

    def refresh(self) -> dict[str, Any]:
        """A cache for every live node (the tree built again when they changed): node id -> its process."""
        return self.place({node["NodeID"] for node in ray.nodes() if node.get("Alive")})

    def place(self, nodes: set[str]) -> dict[str, Any]:
        if nodes == set(self.by_node):
            return dict(self.by_node)
        for node_id in set(self.by_node) - nodes:
            self.by_node.pop(node_id)
        for node_id in sorted(nodes - set(self.by_node)):
            self.by_node[node_id] = self._make(node_id, self._key(node_id))
        self._build()
        return dict(self.by_node)

    def _make(self, node_id: str, key: str, soft: bool = False):
        """The process of one cache, pinned to `node_id` (a cell: there if it can be; an emulation packs them)."""
        strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=soft)
        return ray.remote(CacheProcess).options(num_cpus=0, scheduling_strategy=strategy).remote(
            [key], self.fanout > 0)

    def _process(self, name: str):
        return self.cells[name] if name in self.cells else self.by_node[name]

    def _key(self, name: str) -> str:
        """A cache's key in its process: a cell's name, or `NODE_KEY` for a node's (named by its node id)."""
        return name if name.startswith("cell-") else NODE_KEY

    def _build(self) -> None:
        """The cells above today's nodes (the old cells go), each placed on the node of its first node cache."""
        self._kill(list(self.cells.values()))
        self.cells.clear()
        names = sorted(self.by_node)
        first_node = {name: name for name in names}
        self.parent = {name: None for name in names}
        for tier, groups in enumerate(cell_groups(len(names), self.fanout)):
            above = []
            for index, group in enumerate(groups):
                cell = f"cell-{tier}-{index}"
                first_node[cell] = first_node[names[group[0]]]
                self.cells[cell] = self._make(first_node[cell], cell, soft=True)
                for child in group:
                    self.parent[names[child]] = cell
                self.parent[cell] = None
                above.append(cell)
            names = above
        self.roots = names
        for cell in self.cells:
            self._adopt(cell)
        if self.fanout:
            self._follow(self.roots, None)
        if self.source is not None:
            self.announce(self.version, self.source)

    def _children(self, name: str | None) -> list[str]:
        return [child for child, parent in self.parent.items() if parent == name]

    def _adopt(self, name: str) -> None:
        """Cell `name` tells its children of each version, and they pull from it when a push is late."""
        children = self._children(name)
        self.cells[name].adopt.remote(self._key(name), [(self._process(child), self._key(child)) for child in children])
        self._follow(children, name)

    def _follow(self, names: list[str], parent: str | None) -> None:
        above = None if parent is None else (self._process(parent), self._key(parent))
        for name in names:
            self._process(name).follow.remote(self._key(name), above)

    def announce(self, version: int, source: list) -> None:
        """A new version was published: the learner tells its children (every node's cache, or the top cells)."""
        self.version, self.source = version, source
        for name in self.roots:
            self._process(name).announce.remote(self._key(name), version, source)

    def _reroute(self, cell: str) -> None:
        """A dead cell's children go to the cache above it."""
        above = self.parent.pop(cell, None)
        self.cells.pop(cell, None)
        orphans = self._children(cell)
        for child in orphans:
            self.parent[child] = above
        self.rerouted += len(orphans)
        if above is None:
            self.roots = [name for name in self.roots if name != cell] + orphans
            self._follow(orphans, None)
            for child in orphans:
                if self.source is not None:
                    self._process(child).announce.remote(self._key(child), self.version, self.source)
        else:
            self._adopt(above)
        log.warning("parameter cache %s is gone: its %d caches are told by %s now", cell, len(orphans),
                    above or "the learner")

    def stats(self, wait_s: float = 0.0) -> list[dict]:
        """The caches' counters as of the previous call (or `wait_s` for this one's answers); a cell found dead
        is routed around."""
        if self.asked:
            refs = [ref for _, ref in self.asked]
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=wait_s)
            for name, ref in self.asked:
                if ref in ready:
                    try:
                        self.latest[name] = ray.get(ref, timeout=GET_TIMEOUT_S)[self._key(name)]
                    except RayError:  # the cache is gone; its last counters still count
                        if name in self.cells:
                            self._reroute(name)
        processes = {**{name: self.by_node[name] for name in self.by_node}, **self.cells}
        self.asked = [(name, process.stats.remote()) for name, process in processes.items()]
        return [dict(stats, name=name) for name, stats in self.latest.items()]

    def kill_all(self) -> None:
        self._kill(list(self.by_node.values()) + list(self.cells.values()))
        self.by_node.clear()
        self.cells.clear()

    @staticmethod
    def _kill(processes: list) -> None:
        for process in processes:
            try:
                ray.kill(process)
            except RayError:
                pass
