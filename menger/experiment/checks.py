"""The experiment's cross-field checks and resolved values (`_Experiment`, the base of `ExperimentConfig`).

Every rule here is about the runtime; what an algorithm refuses or needs, it says in its registry entry
(`menger.registry.Algorithm`: properties read here, and its own `problems`)."""
from __future__ import annotations

from menger import registry
from menger.config import ConfigError
from menger.experiment.sections import wrapper_spec
from menger.experiment.tuned import tune_spec


class _Experiment:
    """The cross-field checks and resolved values of an experiment; `ExperimentConfig` below adds the fields.

    Every rule here is about the runtime; what an algorithm refuses or needs, it says in its registry entry
    (`menger.registry.Algorithm`: properties read here, and its own `problems`)."""

    def __post_init__(self):
        script_objects = self._script_object_problems()
        if script_objects:  # before the tuned values' checks, each of which would repeat it
            raise ConfigError(script_objects)
        if self.checkpoint.keep_best and not self.evaluates:  # before the tuned values are tried on this config
            raise ConfigError(f"checkpoint.keep_best=true keeps the checkpoint with the best deterministic evaluation, "
                              f"and this run does not evaluate ({self.algo}'s eval.interval_s is "
                              f"{self.eval.interval_s if self.eval.interval_s is not None else 'off by default'}); "
                              "evaluate it (e.g. --set eval.interval_s=5 or eval.interval_frames=10000), or leave "
                              "checkpoint.keep_best=false")
        if self.auto_keys:
            self._check_auto()
        if self.tune:
            tune_spec(self)  # every tuned key and range checked before anything starts
        algorithm = self.algorithm
        replay = algorithm.learns_from == "replay"
        if replay != (self.coordination == "replay"):
            raise ConfigError(f"runtime.coordination.mode={self.runtime.coordination.mode!r} does not fit algo="
                              f"{self.algo!r}: {registry.listing(lambda a: a.learns_from == 'replay')} learn from "
                              "replay (mode replay or auto), "
                              f"{registry.listing(lambda a: a.learns_from == 'unrolls')} from unrolls as they come "
                              "(sync, async or auto)")
        problems = self._learner_problems() + self._model_problems() + list(algorithm.problems(self))
        if problems:
            raise ConfigError(problems)
        if self.env.normalize.active:
            self._check_normalize()
        learners = self.runtime.learner.count
        if learners > 1 and self.learner_mode == "allreduce":  # every learner needs a column per minibatch, or the
            # ranks would take different step counts
            smallest = self.batch_columns // learners
            needed = algorithm.minibatches(self)
            if smallest < needed:
                raise ConfigError(
                    f"runtime.learner.count={learners} leaves a learner {smallest} unroll column(s) of a "
                    f"{self.batch_columns}-column batch, fewer than the {needed} minibatch(es) it must step on; use "
                    "fewer learners, more runtime.envs_per_actor or a larger runtime.coordination.batch_unrolls")

    @property
    def algorithm(self) -> registry.Algorithm:
        """The registry entry of `algo` (`menger.algorithms`)."""
        return registry.get(self.algo)

    @property
    def auto_keys(self) -> tuple[str, ...]:
        """The runtime keys set to `auto`, which `menger.runtime.autosize` resolves before the run starts."""
        rt = self.runtime
        values = {"runtime.actors": rt.actors, "runtime.envs_per_actor": rt.envs_per_actor,
                  "runtime.coordination.batch_unrolls": rt.coordination.batch_unrolls}
        return tuple(key for key, value in values.items() if value == "auto")

    def _check_auto(self) -> None:
        """`auto` is measured for what the start-up measurement models: one unroll learner on this host."""
        rt, keys = self.runtime, ", ".join(f"{key}=auto" for key in self.auto_keys)
        fix = "; set them to numbers"
        problems = []
        if self.algorithm.learns_from == "replay" or self.learner_mode == "parameter_server":
            problems.append(f"{keys} with algo={self.algo!r}: auto-sizing models actors feeding one learner by "
                            f"unrolls ({registry.listing(lambda a: a.learns_from == 'unrolls')}); {self.algo}'s "
                            f"replay or gradient workers are not modelled{fix}")
        if rt.coordination.batch_unrolls == "auto" and self.coordination != "async":
            problems.append(f"runtime.coordination.batch_unrolls=auto with {self.coordination} coordination: only "
                            f"async coordination ({registry.listing(lambda a: a.coordination == 'async')}) batches "
                            "a number of unrolls; a sync round takes one unroll per actor, so leave batch_unrolls at 0")
        if rt.learner.count > 1:
            problems.append(f"{keys} with runtime.learner.count={rt.learner.count}: auto-sizing models one learner"
                            f"{fix}")
        if rt.inference.mode == "central":
            problems.append(f"{keys} with runtime.inference.mode=central: auto-sizing times inference on the "
                            f"actors (local){fix}")
        if self.league.mode == "league":
            problems.append(f"{keys} with league.mode=league: the league's learners share the machine, which the "
                            f"start-up measurement of one learner does not model{fix}")
        if problems:
            raise ConfigError(problems)

    def _check_normalize(self) -> None:
        if not self.algorithm.normalize:
            raise ConfigError(f"env.normalize with algo={self.algo!r}: running normalisation is built for "
                              f"{registry.listing(lambda a: a.normalize)}; unset env.normalize.obs and "
                              "env.normalize.reward")
        if self.runtime.learner.count > 1:
            raise ConfigError(f"env.normalize with runtime.learner.count={self.runtime.learner.count}: the running "
                              "statistics live with one learner; use runtime.learner.count=1")

    @property
    def normalize_gamma(self) -> float:
        """The discount of the return whose std scales rewards."""
        gamma = self.env.normalize.gamma
        if gamma is not None:
            return gamma
        return self.algorithm.gamma(self)

    def _learner_problems(self) -> list[str]:
        """The learner mode against what the algorithm supports, and what a parameter server refuses."""
        rt, algorithm, problems = self.runtime, self.algorithm, []
        if self.learner_mode == "parameter_server" and "parameter_server" not in algorithm.learner_modes:
            problems.append(f"runtime.learner.mode=parameter_server with algo={self.algo!r}: gradient workers are "
                            f"built for {registry.listing(lambda a: 'parameter_server' in a.learner_modes)}; train "
                            "it with runtime.learner.mode=allreduce (or auto)")
        if self.learner_mode == "parameter_server":
            if rt.inference.mode == "central":
                problems.append("runtime.inference.mode=central: an actor-learner computes its gradient on its own "
                                "copy of the parameters; use runtime.inference.mode=local")
        elif rt.learner.count > 1 and algorithm.learns_from == "replay":
            problems.append(f"runtime.learner.count={rt.learner.count}: {self.algo} trains with one learner; use "
                            "runtime.learner.count=1 (or algo "
                            f"{registry.listing(lambda a: a.gradient_learners)}, whose learners push gradients "
                            "to a parameter server)")
        return problems

    def _model_problems(self) -> list[str]:
        """What the model and inference sections ask that the algorithm's networks do not do."""
        algorithm, model, problems = self.algorithm, self.model, []
        if self.runtime.inference.mode == "central" and not algorithm.central_inference \
                and self.learner_mode != "parameter_server":
            problems.append(f"runtime.inference.mode=central: {self.algo}'s actors act on their cached parameters; "
                            "use runtime.inference.mode=local")
        if model.network and not algorithm.custom_network:
            problems.append(f"model.network: {self.algo} builds its own networks from model.encoder, model.hidden "
                            "and model.lstm_size; unset it")
        if model.agents and not algorithm.independent_agents:
            problems.append(f"model.agents={model.agents}: independent agents' networks are built for "
                            f"{registry.listing(lambda a: a.independent_agents)}; {self.algo} trains one network, "
                            "so unset model.agents (an agent_id observation entry is then an input of that one "
                            "network)")
        if model.lstm_size and not algorithm.recurrent:
            problems.append(f"model.lstm_size={model.lstm_size}: {self.algo} builds feed-forward networks; unset it, "
                            f"or use algo {registry.listing(lambda a: a.recurrent and a.actions == 'q')} for a "
                            "recurrent Q network")
        if model.squash_mean and algorithm.actions != "policy":
            problems.append(f"model.squash_mean=true squashes the Gaussian mean of the policy network of "
                            f"{registry.listing(lambda a: a.actions == 'policy')}; algo {self.algo} builds its own "
                            "network without it (sac's actor squashes its actions already): unset "
                            "model.squash_mean")
        if model.board_mirror and not algorithm.board_mirror:
            problems.append(f"model.board_mirror=true is built into the policy network of "
                            f"{registry.listing(lambda a: a.board_mirror)}; algo {self.algo} builds its own "
                            "network without it: unset model.board_mirror")
        return problems

    def _script_object_problems(self) -> list[str]:
        """Objects of the running script (`__main__:Name`, what `menger.train(env=MyEnv)` records for a class defined
        there) reach threads and forked processes, never Ray's workers, which import a name and run no script."""
        if self.runtime.launcher != "ray":
            return []
        named = {"env.id": self.env.id, "model.network": self.model.network}
        named.update({f"env.wrappers[{index}]": wrapper_spec(item)[0] for index, item in enumerate(self.env.wrappers)})
        return [f"{key}={value!r} is defined in the script that started the run, and runtime.launcher=ray builds it "
                f"in Ray's worker processes, which import it by name and never run that script: move "
                f"{value.partition(':')[2]} into a module every node can import (a package installed there, or one "
                f"in the job's working_dir) and pass it from there, or train with runtime.launcher=processes or "
                f"threads (they inherit the script's objects)"
                for key, value in named.items() if value and value.partition(":")[0].strip() == "__main__"]

    @property
    def learner_mode(self) -> str:
        """The resolved `runtime.learner.mode`: 'allreduce' or 'parameter_server'."""
        mode = self.runtime.learner.mode
        if mode != "auto":
            return mode
        return self.algorithm.learner_modes[0]

    @property
    def coordination(self) -> str:
        """The resolved coordination mode: 'sync', 'async' or 'replay'."""
        mode = self.runtime.coordination.mode
        if mode != "auto":
            return mode
        if self.algorithm.learns_from == "replay":
            return "replay"
        if self.learner_mode == "parameter_server":
            return self.runtime.parameter_server.update
        return self.algorithm.coordination

    @property
    def evaluates(self) -> bool:
        """Whether deterministic evaluations run during training, every eval.interval_frames or eval_interval_s."""
        return self.eval.interval_frames is not None or self.eval_interval_s > 0

    @property
    def eval_interval_s(self) -> float:
        """Seconds between deterministic evaluations during training; 0 = none."""
        interval = self.eval.interval_s
        if interval is None:
            return 5.0 if self.algorithm.evaluation == "greedy" else 0.0
        return interval

    @property
    def batch_columns(self) -> int:
        """Unroll columns (envs) in one learner batch: an unroll of every actor (sync), or `batch_unrolls` (async)."""
        rt = self.runtime
        if self.coordination == "sync":
            unrolls = rt.actors
        elif self.learner_mode == "parameter_server":
            unrolls = 1  # async: each gradient is applied as it arrives
        else:
            unrolls = rt.coordination.batch_unrolls or rt.actors
        return unrolls * rt.envs_per_actor
