"""Replay coordination (Ape-X DQN, SAC): unrolls become replay items in place; batches are sampled from replay.

The actors' unroll slots *are* the replay's storage (where they live is the transport's `ChunkStore`: shared
memory on one host; on Ray the per-step fields here and the observations in a shard on each actor's node).
Each actor owns a ring of slots (chunks); a replay item is a reference (slot, t, b, bootstrap step, n-step reward
sum, discount product) into a chunk, kept in a `menger.replay.Table` (one per shard) with its priority. Only
slot numbers and tags cross processes::

    grant(actor, slot)       the actor's oldest chunk: its items are deleted from the table first, so nothing can
                             sample a chunk while it is rewritten (an actor killed mid-write leaves no item)
    accept(slot, meta)       the unroll is cut into n-step items (`menger.losses.n_step_items`) and inserted with
                             Ape-X's initial priorities |R + D max_a Q(s', a) - Q(s, a)| from the actor's own values
                             (uniform sampling: priority 1); what the rate limiter does not admit yet waits
    batch_ready()            the table's rate limiter admits a sample of `replay.batch_size`
    take_batch()             sample, then gather obs, next obs and actions from the chunks; importance weights
                             (on Ray the next batch is sampled at once and its observations fetched meanwhile)
    learned(batch, stats)    the learner's new priorities go back to the sampled keys

Back-pressure is Reverb's: an actor gets a new chunk only when its shard's limiter admits inserts and nothing it
wrote still waits to go in, so the limiter's samples per insert hold however fast the actors are.

A chunk is evicted whole (its actor's oldest), so the replay holds the newest `max_size` items, give or take an
unroll. Sharding: actor i writes into shard i % shards (on Ray: its node's); the learner samples across shards in
proportion to their priority mass (`menger.replay.ShardedTables`).

`replay.lockstep`: one chunk at a time, in actor order, and after each the updates the limiter admits, before
the next grant goes out (and only after the update is published). Everything is then a function of the seeds,
so a checkpoint taken after any update can resume bit for bit (the actors are idle at every update).
"""
from __future__ import annotations

import dataclasses
import math
import time
from collections import deque

import numpy as np
import torch

from menger.coordinator.base import FlowControlError, SlotCoordinator
from menger.core import Batch, UnrollMeta, Verdict
from menger.losses import n_step_items
from menger.losses.dqn import PRIORITY_EPS
from menger.replay import (MinSize, ReplayTimeout, SampleToInsertRatio, ShardedTables, Table, fifo,
                           importance_weights, prioritized, uniform)

ITEM_SPEC = {"slot": ((), np.int32), "t": ((), np.int32), "b": ((), np.int32), "boot": ((), np.int32),
             "reward": ((), np.float32), "discount": ((), np.float32)}
STATE_FORMAT = "menger.coordinator.replay/1"


@dataclasses.dataclass
class _Waiting:
    """An accepted chunk whose items the limiter has not all admitted yet."""

    slot: int
    meta: UnrollMeta
    shard: int
    items: dict
    priorities: np.ndarray
    done: int = 0
    keys: list = dataclasses.field(default_factory=list)


class ReplayCoordinator(SlotCoordinator):
    item_spec = ITEM_SPEC  # what an item names; `SequenceReplayCoordinator` has its own

    def __init__(self, num_actors: int, replay, *, unroll_length: int, envs_per_actor: int, in_flight: int,
                 gamma: float, n_step: int, seed: int):
        """`replay`: the experiment's `ReplayConfig`; `in_flight`: chunks an actor may fill at once
        (runtime.coordination.slots_per_actor)."""
        self.cfg, self.gamma, self.n_step = replay, gamma, n_step
        self.chunk_items = self._items_per_env(unroll_length) * envs_per_actor
        self.in_flight = 1 if replay.lockstep else in_flight
        self.ring_capacity = max(1, math.ceil(replay.max_size / (num_actors * self.chunk_items)))  # chunks each
        super().__init__(num_actors, self.ring_capacity + self.in_flight)
        self.idle_between_batches = replay.lockstep  # lockstep: actors wait at every update, a clean cut
        self.prioritized = replay.sampler == "prioritized"
        if replay.samples_per_insert <= 0 and replay.lockstep:
            raise FlowControlError("replay.lockstep needs replay.samples_per_insert > 0: it grants the next "
                                   "unroll once the learner has had the samples the last one paid for")
        self.seed = seed
        self.tables: ShardedTables | None = None  # built by attach, once the chunk store says how shards map
        self.store = None
        self.ring: list[deque] = [deque() for _ in range(num_actors)]  # committed chunks, oldest first
        self.keys: dict[int, np.ndarray] = {}                         # slot -> keys of its items
        self.waiting: list[_Waiting] = []
        self.new_metas: list[UnrollMeta] = []  # committed since the last batch: the next batch accounts for them
        self.tensors: dict | None = None
        self.chunk_bytes = 0  # set by attach
        self._prefetched: tuple | None = None  # (sample, request): the next batch, gathering while the learner steps
        self._last_keys: np.ndarray | None = None
        self._updating = False
        self._next_actor = 0
        # per shard, the actors that may want a chunk (alive, fewer than in_flight granted), longest-waiting first:
        # a turn's grants look at these, not at every actor
        self._hungry: dict[int, dict[int, None]] = {}
        self._lost_chunks = 0
        self._rates = {"at": time.monotonic(), "inserts": 0, "samples": 0}

    def _items_per_env(self, unroll_length: int) -> int:
        return unroll_length  # an item per step

    def _build_tables(self, num_actors: int, seed: int, fixed_shards: bool) -> ShardedTables:
        """One table per shard. Where an actor's shard is fixed (actor i % shards), a shard holds at most its
        actors' chunks; where it follows the actor's node (Ray), any shard may hold every chunk."""
        cfg = self.cfg
        shards = min(cfg.shards, num_actors)
        tables = []
        for shard in range(shards):
            actors = len(range(shard, num_actors, shards)) if fixed_shards else num_actors
            capacity = actors * self.slots_per_actor * self.chunk_items  # chunks are evicted before this fills
            min_size = max(1, math.ceil(cfg.min_size / shards))
            if cfg.samples_per_insert > 0:
                buffer = cfg.error_buffer or 2 * cfg.batch_size + 2 * self.chunk_items * cfg.samples_per_insert
                limiter = SampleToInsertRatio(cfg.samples_per_insert, min_size, buffer)
            else:
                limiter = MinSize(min_size)
            sampler = prioritized(cfg.alpha) if self.prioritized else uniform()
            tables.append(Table(f"replay{shard}", capacity, sampler, fifo(), limiter, item_spec=self.item_spec,
                                seed=seed * 7919 + shard))
        return ShardedTables(tables, seed=seed)

    def attach(self, transport) -> None:
        """The chunks: the transport's `ChunkStore` (its unroll slots in shared memory on one host; on Ray the
        per-step fields in the learner and the observations in a replay shard on each actor's node)."""
        self.store = transport.chunk_store()
        self.tensors = self.store.tensors
        self.chunk_bytes = self.store.nbytes
        self.tables = self._build_tables(self.num_actors, self.seed, self.store.fixed_shards)
        for actor_id in range(self.num_actors):  # any started before the tables were built
            self._hunger(actor_id)

    def shard_of(self, actor_id: int) -> int:
        return self.store.shard_of(actor_id, self.tables.num_shards)

    # ----- grants ---------------------------------------------------------------------------------------
    def _on_started(self, actor_id: int, first: bool) -> None:
        self._hunger(actor_id)  # grants are decided in grants(), from the limiter's state

    def _hunger(self, actor_id: int) -> None:
        """The actor may want a chunk now: grants() will look at it (in its shard's queue)."""
        if self.alive[actor_id] and self.granted_to[actor_id] < self.in_flight and self.tables is not None:
            self._hungry.setdefault(self.shard_of(actor_id), {})[actor_id] = None

    def grant_failed(self, actor_id: int, slot: int) -> None:
        super().grant_failed(actor_id, slot)
        self._hunger(actor_id)

    def _reclaim(self, actor_id: int) -> None:
        super()._reclaim(actor_id)  # committed and waiting chunks keep their data: never free them here
        held = {slot for slot in self.ring[actor_id]} | {w.slot for w in self.waiting}
        self.free[actor_id] = [slot for slot in self.free[actor_id] if slot not in held]

    def grants(self) -> list[tuple[int, int]]:
        self._forget(self.store.take_lost())
        if self.cfg.lockstep:
            self._lockstep_grant()
        else:
            self._grant_hungry()
        return super().grants()

    def _grant_hungry(self) -> None:
        """Chunks for the actors that want one, shard by shard: none while the shard has chunks waiting to go in or
        its limiter admits no insert (the shard's actors then wait, their turn kept)."""
        if not self._hungry:
            return
        blocked = {w.shard for w in self.waiting}
        for shard, actors in list(self._hungry.items()):
            table = self.tables.shard(shard)
            if shard in blocked or not table.can_insert(1):
                continue  # a shut shard's writers keep their turn, and are not even copied out
            for actor_id in list(actors):
                if not table.can_insert(1):
                    break
                while (self.alive[actor_id] and self.granted_to[actor_id] < self.in_flight
                       and table.can_insert(1) and self.shard_of(actor_id) == shard):
                    if not self._grant_chunk(actor_id):
                        break
                if not self.alive[actor_id] or self.granted_to[actor_id] >= self.in_flight or \
                        self.shard_of(actor_id) != shard:
                    del actors[actor_id]
            if not actors:
                del self._hungry[shard]

    def _lockstep_grant(self) -> None:
        busy = self.granted or self.waiting or self._updating
        if busy or self.tables.can_sample(self.cfg.batch_size):
            return
        for step in range(self.num_actors):
            actor_id = (self._next_actor + step) % self.num_actors
            if self.alive[actor_id]:
                self._next_actor = (actor_id + 1) % self.num_actors
                self._grant_chunk(actor_id)
                return

    def _grant_chunk(self, actor_id: int) -> bool:
        """Grant the actor a free chunk; first, while its committed, waiting and granted chunks would fill its
        share of `max_size`, the items of its oldest chunk leave the table (that chunk is free again)."""
        ring = self.ring[actor_id]
        held = sum(1 for w in self.waiting if w.meta.actor_id == actor_id) + self.granted_to[actor_id]
        while ring and len(ring) + held >= self.ring_capacity:
            slot = ring.popleft()
            self.tables.delete(self.keys.pop(slot))
            self.free[actor_id].append(slot)
        if not self.free[actor_id]:  # cannot happen with ring_capacity + in_flight slots; never spin on it
            return False
        self._grant(actor_id)
        return True

    # ----- unrolls --------------------------------------------------------------------------------------
    def accept(self, slot: int, meta: UnrollMeta) -> Verdict:
        verdict = super().accept(slot, meta)
        self._hunger(self.owner(slot))  # the slot is no longer granted: its actor may want another
        return verdict

    def _keep(self, slot: int, meta: UnrollMeta) -> None:
        """An accepted unroll becomes items (what the limiter does not admit yet waits)."""
        items, priorities = self._items(slot)
        self.waiting.append(_Waiting(slot, meta, self.shard_of(meta.actor_id), items, priorities))
        self._commit()

    def _items(self, slot: int) -> tuple[dict, np.ndarray]:
        """The chunk's n-step items, as references into it, and their initial priorities."""
        t = self.tensors
        rewards, valid = t["rewards"][slot], t["valid"][slot]
        ends = t["terminated"][slot] if "terminated" in t else t["dones"][slot]  # a time limit bootstraps
        steps, envs = rewards.shape
        index = torch.arange((steps + 1) * envs).view(steps + 1, envs)
        cut = n_step_items(index, torch.zeros(steps, envs, dtype=torch.int64), rewards, self.gamma * (1.0 - ends),
                           valid, self.n_step)
        boot = cut.start + cut.length
        items = {"slot": np.full(len(cut.start), slot, np.int32), "t": cut.start.numpy().astype(np.int32),
                 "b": cut.env.numpy().astype(np.int32), "boot": boot.numpy().astype(np.int32),
                 "reward": cut.rewards.numpy().astype(np.float32),
                 "discount": cut.discounts.numpy().astype(np.float32)}
        if self.prioritized and "values" in t:  # Ape-X: the actor's own Q values
            q_taken = t["logp"][slot][cut.start, cut.env]
            bootstrap = t["values"][slot][boot, cut.env]
            td = cut.rewards + cut.discounts * bootstrap - q_taken
            priorities = (td.abs() + PRIORITY_EPS).double().numpy()
        else:
            priorities = np.ones(len(cut.start))
        return items, priorities

    def _commit(self) -> None:
        """Insert what the limiters admit, oldest chunk first within each shard (a shard whose limiter is shut
        does not hold up the others); a chunk fully in joins its actor's ring."""
        shut: set[int] = set()
        for w in list(self.waiting):
            if w.shard in shut:
                continue
            rest = {k: v[w.done:] for k, v in w.items.items()}
            try:
                local = self.tables.shard(w.shard).insert_batch(rest, w.priorities[w.done:], timeout_s=0)
            except ReplayTimeout as blocked:  # the limiter admitted part: the rest waits for samples
                w.keys.append(self._global_keys(w.shard, blocked.keys))
                w.done += blocked.completed
                shut.add(w.shard)
                continue
            w.keys.append(self._global_keys(w.shard, local))
            w.done = len(w.priorities)
            self.waiting.remove(w)
            self.keys[w.slot] = np.concatenate(w.keys)
            self.ring[self.owner(w.slot)].append(w.slot)
            self.new_metas.append(w.meta)
            self._rates["inserts"] += len(w.priorities)

    def _forget(self, slots: list[int]) -> None:
        """Chunks whose storage is gone (their node died): their items leave the tables, the slots are free."""
        for slot in slots:
            keys = [self.keys.pop(slot)] if slot in self.keys else []
            for w in [w for w in self.waiting if w.slot == slot]:
                self.waiting.remove(w)
                keys += w.keys
            if keys:
                self.tables.delete(np.concatenate(keys))
            owner = self.owner(slot)
            if slot in self.ring[owner]:
                self.ring[owner].remove(slot)
            if slot not in self.granted and slot not in self.free[owner]:
                self.free[owner].append(slot)
            self._lost_chunks += 1

    def _global_keys(self, shard: int, local) -> np.ndarray:
        """A shard's keys as `ShardedTables` names them (shard key x shards + shard)."""
        return np.asarray(local, np.int64) * self.tables.num_shards + shard

    # ----- batches --------------------------------------------------------------------------------------
    def batch_ready(self) -> bool:
        return self.tensors is not None and (self._prefetched is not None
                                             or self.tables.can_sample(self.cfg.batch_size))

    def _batch_size(self) -> int:
        return self.cfg.batch_size

    def take_batch(self, gather) -> Batch | None:
        """The next sampled batch; None only on Ray when every item in it was on a node that is gone."""
        sample, request = self._prefetched or self._sample()
        self._prefetched = None
        obs, kept = self.store.fetch(request)
        self._forget(self.store.take_lost())
        self._commit()  # the sample may have opened the limiter for waiting inserts
        if self.store.prefetch and not self.cfg.lockstep and self.tables.can_sample(self.cfg.batch_size):
            self._prefetched = self._sample()  # its observations travel while the learner steps on this one
        d, keys = sample.data, sample.keys
        weights = importance_weights(sample, self.cfg.beta) if self.prioritized else np.ones(len(sample))
        if kept is not None and not kept.all():  # a node died with part of the batch: learn from the rest
            if not kept.any():
                return None
            d, keys, weights = {k: v[kept] for k, v in d.items()}, keys[kept], weights[kept]
        data = self._batch_data(d, obs)
        data["weights"] = torch.from_numpy(weights.astype(np.float32))
        self._last_keys, self._updating = keys, True
        metas, self.new_metas = self.new_metas, []
        return Batch(data, metas, [self.version - meta.policy_version for meta in metas], keys=keys)

    def _batch_data(self, d: dict, obs) -> dict:
        """The learner's batch of sampled items `d` (with their observations [N, 2, ...]: at t and at boot)."""
        slot, t, b = (torch.from_numpy(d[k].astype(np.int64)) for k in ("slot", "t", "b"))
        return {"obs": _step(obs, 0), "next_obs": _step(obs, 1), "actions": self.tensors["actions"][slot, t, b],
                "rewards": torch.from_numpy(d["reward"]), "discounts": torch.from_numpy(d["discount"])}

    def _steps(self, d: dict) -> torch.Tensor:
        """[N, K]: the steps of each sampled item whose observations the batch needs (here t and boot)."""
        return torch.from_numpy(np.stack([d["t"], d["boot"]], 1).astype(np.int64))

    def _sample(self) -> tuple:
        """Sample a batch and start gathering its observations (in place on one host; remote calls on Ray)."""
        sample = self.tables.sample(self.cfg.batch_size, timeout_s=0)
        self._rates["samples"] += len(sample)
        slot, b = (torch.from_numpy(sample.data[k].astype(np.int64)) for k in ("slot", "b"))
        return sample, self.store.request(slot, self._steps(sample.data), b)

    def learned(self, batch: Batch, stats: dict) -> None:
        priorities = stats.pop("priorities", None)
        keys = batch.keys if batch.keys is not None else self._last_keys  # GORILA: several batches in flight
        if priorities is not None and self.prioritized and keys is not None:
            self.tables.update_priorities(keys, priorities)

    def published(self, version: int) -> None:
        super().published(version)
        self._updating = False

    def _on_taken(self, slot: int) -> None:  # never called: batches are samples, not slots
        raise AssertionError("replay batches do not take slots")

    # ----- metrics and checkpoints ----------------------------------------------------------------------
    def metrics(self) -> dict:
        now = time.monotonic()
        dt, rates = max(1e-9, now - self._rates["at"]), self._rates
        out = self.tables.metrics()
        out.update(self.store.metrics())
        out.update({"replay/inserts_per_s": rates["inserts"] / dt, "replay/samples_per_s": rates["samples"] / dt,
                    "replay/bytes": out.get("replay/bytes", 0) + self.chunk_bytes + out.get("replay/shard_bytes", 0),
                    "replay/index_bytes": out.get("replay/bytes", 0), "replay/chunk_bytes": self.chunk_bytes,
                    "replay/waiting_inserts": sum(len(w.priorities) - w.done for w in self.waiting),
                    "replay/chunks_lost": self._lost_chunks})
        self._rates = {"at": now, "inserts": 0, "samples": 0}
        return out

    def state(self) -> dict:
        """The replay as the checkpoint keeps it: the tables, the chunks' contents and who holds which chunk.

        The chunks are not copied: while the trainer saves it grants nothing, so the only chunks written meanwhile
        are ones granted before, whose contents no item names (a restore frees them)."""
        chunks = self.store.state(self._held_slots())
        self._forget(self.store.take_lost())  # on Ray: chunks whose shard did not answer are not saved as items
        return {"format": STATE_FORMAT, "tables": self.tables.state(), "chunks": chunks,
                "ring": [list(r) for r in self.ring],
                "keys": {str(slot): keys for slot, keys in self.keys.items()},
                "waiting": [{"slot": w.slot, "shard": w.shard, "done": w.done, "meta": _meta_data(w.meta),
                             "keys": np.concatenate(w.keys) if w.keys else np.zeros(0, np.int64)}
                            for w in self.waiting],
                "new_metas": [_meta_data(m) for m in self.new_metas], "next_actor": self._next_actor}

    def load_state(self, state: dict) -> None:
        """Into a coordinator built with the same settings, attached to its transport, before any actor starts."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise ValueError("the checkpoint's replay state is not one this version writes; resume with the "
                             "Menger version that wrote it, or start a new run")
        self.ring = [deque(int(s) for s in r) for r in state["ring"]]
        held = self._held_slots() + [int(w["slot"]) for w in state["waiting"]]
        self.store.load(state["chunks"], held)
        self.tables.load_state(state["tables"])
        self.keys = {int(slot): np.asarray(keys, np.int64) for slot, keys in state["keys"].items()}
        self.waiting = []
        for w in state["waiting"]:
            items, priorities = self._items(int(w["slot"]))
            meta = _meta(w["meta"])
            shard = int(w.get("shard", meta.actor_id % self.tables.num_shards))
            self.waiting.append(_Waiting(int(w["slot"]), meta, shard, items, priorities, int(w["done"]),
                                         [np.asarray(w["keys"], np.int64)]))
        self.new_metas = [_meta(m) for m in state["new_metas"]]
        self._next_actor = int(state["next_actor"])

    def _held_slots(self) -> list[int]:
        """The chunks items can name: every actor's ring and what waits to go in."""
        return [slot for ring in self.ring for slot in ring] + [w.slot for w in self.waiting]

    def close(self) -> None:
        if self.tables is not None:
            self.tables.close()


def _step(obs, k: int):
    """Column k of gathered observations [N, K, ...] (a tensor or a dict of them)."""
    return {key: v[:, k] for key, v in obs.items()} if isinstance(obs, dict) else obs[:, k]


def _meta_data(meta: UnrollMeta) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(meta).items()}


def _meta(data: dict) -> UnrollMeta:
    fields = {k: tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v
              for k, v in data.items()}
    return UnrollMeta(**fields)
