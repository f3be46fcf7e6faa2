"""The fault suite as figures: every fault of docs/guides/reliability.md's table, and the reliability issue's list, injected
into real runs, and every bad input of the bad-input table tried, with what each one measured.

Each fault is injected by a test of `tests/faults` (and a few elsewhere) that measures the table's figure and
prints it. This script runs those tests with pytest's JUnit report, `--runs` times, and reads back for each fault
whether the runtime survived it (the test passed: its assertions are the table's "expected" column) and the
figure it printed. Then it repeats the random-kill learning test `--kill-runs` times in a row (the issue asks for
20), and counts the bad inputs refused with one clear message before the run directory existed.

    python benchmarks/faults.py [--runs 1] [--kill-runs 20] [--only SUBSTRING] [--json out.json]

Printed: one row per fault (survived / injected over every run, the figure of the last run), the random-kill
streak, and bad inputs with a clear error / tried. A fault whose test failed is shown with its failure.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
F = "tests/faults/"


@dataclass(frozen=True)
class Fault:
    name: str
    expected: str
    tests: tuple[str, ...]  # pytest node ids (a parametrized test counts once per parameter)


FAULTS = [
    Fault("SIGKILL one actor mid-unroll", "restarted, learner never blocks, frames lost <= 1 unroll, duplicates 0",
          (F + "test_actor_faults.py::test_sigkill_one_actor_mid_unroll_restarts_it_and_loses_at_most_one_unroll",)),
    Fault("kill random actors during a learning test", "still reaches the reward target",
          (F + "test_actor_faults.py::test_random_actor_kills_during_learning_still_reach_the_target",)),
    Fault("restart back-off after healthy incarnations", "back-off resets once an incarnation delivers",
          (F + "test_actor_faults.py::test_restart_back_off_resets_once_an_incarnation_is_healthy",)),
    Fault("kill all actors / env fails on every reset", "reported, exits non-zero after the deadline; restarts <= cap",
          (F + "test_actor_faults.py::test_actors_that_always_die_end_the_run_with_no_actors_error_within_the_deadline",
           F + "test_actor_faults.py::test_cli_exits_non_zero_when_every_actor_is_gone")),
    Fault("SIGSTOP an actor, later SIGCONT", "flagged and replaced; stale unrolls accepted = 0",
          (F + "test_actor_faults.py::test_sigstopped_actor_is_flagged_replaced_and_its_stale_unrolls_rejected",)),
    Fault("an actor thread stalls in step()", "learner never blocks; the stale thread writes nothing new",
          (F + "test_actor_faults.py::test_stalled_actor_thread_neither_blocks_the_learner_nor_writes_into_a_new_"
               "incarnations_slot",)),
    Fault("an env whose reset() hangs", "flagged after start-up grace + heartbeat timeout; run ends naming both",
          (F + "test_actor_faults.py::test_an_actor_hanging_in_reset_is_flagged_after_its_grace_and_the_run_ends_"
               "naming_the_deadlines",)),
    Fault("env raises in step / returns NaN", "env rebuilt / value dropped; non-finite values at the learner = 0",
          (F + "test_actor_faults.py::test_env_that_raises_or_returns_nan_is_rebuilt_and_nothing_nonfinite_reaches_"
               "the_learner",)),
    Fault("episodes cut by env faults", "counted as faulty, kept out of the returns; counters are totals",
          (F + "test_actor_faults.py::test_episodes_a_fault_cut_short_are_counted_and_kept_out_of_the_returns",
           F + "test_actor_faults.py::test_env_fault_counters_are_totals_over_every_incarnation")),
    Fault("actor SIGKILLed while writing replay chunks", "no half-written item is ever sampled",
          (F + "test_replay_faults.py::test_an_actor_killed_mid_write_leaves_no_half_written_item_to_sample",)),
    Fault("SIGKILL the learner, resume", "resumes from the newest valid checkpoint, counters intact",
          (F + "test_resume_faults.py::test_sigkill_the_learner_then_resume_from_the_newest_checkpoint_with_counters_"
               "intact",)),
    Fault("SIGKILL the learner under --supervise", "resumed without a human; exit codes not retried",
          (F + "test_supervise_faults.py",)),
    Fault("SIGTERM / SIGHUP", "closing checkpoint, distinct exit code; a second signal interrupts",
          (F + "test_signal_faults.py",)),
    Fault("SIGKILL during checkpoint writes, many times", "the newest complete checkpoint always loads",
          (F + "test_checkpoint_faults.py",)),
    Fault("corrupt / truncate the newest checkpoint", "detected, falls back to the previous one; all damaged refuses",
          (F + "test_resume_faults.py::test_damaged_newest_checkpoint_is_detected_and_resume_falls_back_to_the_"
               "previous_one",
           F + "test_resume_faults.py::test_every_checkpoint_damaged_refuses_to_resume_instead_of_starting_from_"
               "scratch",
           "tests/test_checkpoint.py::test_a_malformed_meta_json_behind_a_matching_manifest_falls_back_to_the_"
           "previous_checkpoint")),
    Fault("disk full during a save", "save fails cleanly, previous checkpoint intact",
          ("tests/test_checkpoint.py::test_disk_full_mid_write_fails_cleanly",)),
    Fault("two processes on one run directory", "the second refused naming the owner; saves keep others' temporaries",
          (F + "test_rundir_faults.py",)),
    Fault("an env constructor that hangs", "the run ends with an error naming the env, no freeze",
          (F + "test_config_faults.py::test_an_env_whose_constructor_hangs_ends_the_run_with_an_error_not_a_freeze",)),
    Fault("runs that cannot learn", "non-zero exit: invalid frames, non-finite loss, no update in the wall clock",
          (F + "test_health_faults.py",)),
    Fault("a run directory naming code (os:system)", "refused before anything is imported; allowed by consent",
          (F + "test_untrusted_run.py",)),
    Fault("listening ports of data-parallel learners", "nothing listens on a non-loopback address",
          ("tests/distributed/test_data_parallel.py::test_the_learners_rendezvous_and_collectives_listen_on_no_"
           "outside_address",)),
    Fault("an A3C actor-learner SIGKILLed while writing its gradient", "never applied; a new incarnation goes on",
          ("tests/distributed/test_a3c.py::test_an_actor_killed_while_writing_its_gradient_never_has_it_applied",)),
    Fault("a GORILA learner SIGKILLed while writing its gradient", "never applied; the other learner goes on",
          ("tests/distributed/test_gorila.py::test_a_learner_killed_while_writing_its_gradient_leaves_nothing_"
           "applied_and_the_other_goes_on",)),
    Fault("a parameter-server shard SIGKILLed", "processes: the run ends naming it and resumes; Ray: remade",
          ("tests/params/test_parameter_server_processes.py::test_a_run_whose_shard_is_killed_fails_naming_it_"
           "and_resumes_from_its_checkpoint",
           "tests/ray/test_ray_parameter_server.py::test_a_killed_shard_is_remade_from_its_last_snapshot_and_the_"
           "step_goes_on")),
    Fault("listening ports of gradient workers on one host", "none at all (A3C, GORILA)",
          ("tests/distributed/test_gorila.py::test_gradient_workers_on_one_host_open_no_network_port",)),
]
BAD_INPUTS = (F + "test_bad_inputs.py", F + "test_config_faults.py::test_bad_override_exits_2_naming_the_key_before_"
              "starting", F + "test_config_faults.py::test_mistyped_key_in_an_experiment_file_is_named_with_its_section",
              F + "test_config_faults.py::test_a_run_that_cannot_start_says_why_in_one_message_and_leaves_no_run_"
              "directory", F + "test_config_faults.py::test_an_unwritable_run_directory_is_one_clear_message",
              F + "test_config_faults.py::test_resume_with_a_mistyped_override_exits_2_and_leaves_the_run_alone")
RANDOM_KILLS = FAULTS[1].tests[0]


def run_pytest(node_ids: list[str], report: Path, timeout_s: float = 3600) -> list[dict]:
    """Run the tests; one record per test case: its id, whether it passed, its printed lines, its failure."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_logging=system-out",
               f"--junitxml={report}", *node_ids]
    subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout_s)
    if not report.exists():
        raise SystemExit(f"pytest wrote no report for {node_ids}: run `{' '.join(command)}` to see why")
    cases = []
    for case in ET.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped") is not None
        out = (case.findtext("system-out") or "").strip()
        cases.append({"id": f"{case.get('classname', '')}::{case.get('name', '')}", "passed": failure is None and
                      not skipped, "skipped": skipped, "seconds": float(case.get("time", 0)),
                      "printed": [line for line in out.splitlines() if line.strip() and "Captured" not in line],
                      "failure": None if failure is None else (failure.get("message") or "")[:300]})
    return cases


def _belongs(case_id: str, node_id: str) -> bool:
    """Whether a JUnit case (dotted class path :: test name[param]) is one of the node id's tests."""
    path, _, test = node_id.partition("::")
    module = path[:-3].replace("/", ".")
    name, class_path = case_id.split("::")[-1], case_id.split("::")[0]
    return class_path == module and (not test or name.split("[")[0] == test)


def figure(cases: list[dict]) -> str:
    """The figures the fault's tests printed (the last line of each), or the first failure."""
    failed = [c for c in cases if not c["passed"] and not c["skipped"]]
    if failed:
        return f"FAILED {failed[0]['id'].split('::')[-1]}: {failed[0]['failure']}"
    lines = [c["printed"][-1] for c in cases if c["printed"]]
    return " | ".join(lines)[:400] if lines else "(passed; prints no figure)"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="times the whole fault suite is run")
    parser.add_argument("--kill-runs", type=int, default=20, help="runs in a row of the random-kill learning test")
    parser.add_argument("--only", help="only the faults whose name holds this text (and no bad inputs or streak)")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args(argv)
    faults = [f for f in FAULTS if args.only is None or args.only in f.name]
    load_start, started = os.getloadavg()[0], time.monotonic()
    results: dict[str, dict] = {f.name: {"injected": 0, "survived": 0, "cases": []} for f in faults}
    with tempfile.TemporaryDirectory(prefix="menger-faults-") as scratch:
        for run in range(args.runs):
            cases = run_pytest([t for f in faults for t in f.tests], Path(scratch) / f"faults{run}.xml")
            for fault in faults:
                mine = [c for c in cases if any(_belongs(c["id"], t) for t in fault.tests) and not c["skipped"]]
                results[fault.name]["injected"] += len(mine)
                results[fault.name]["survived"] += sum(c["passed"] for c in mine)
                results[fault.name]["cases"] = mine
            print(f"fault suite run {run + 1}/{args.runs} done", file=sys.stderr, flush=True)
        streak, kills = None, []
        bad = None
        if args.only is None:
            for run in range(args.kill_runs):
                kills += run_pytest([RANDOM_KILLS], Path(scratch) / f"kills{run}.xml")
                print(f"random-kill run {run + 1}/{args.kill_runs}: {'passed' if kills[-1]['passed'] else 'FAILED'}",
                      file=sys.stderr, flush=True)
            streak = {"passed": sum(c["passed"] for c in kills), "runs": len(kills)}
            bad_cases = run_pytest(list(BAD_INPUTS), Path(scratch) / "bad.xml")
            bad = {"clear": sum(c["passed"] for c in bad_cases), "tried": len(bad_cases),
                   "refused": [c["id"].split("::")[-1] for c in bad_cases if not c["passed"]]}
    width = max(len(f.name) for f in faults)
    lines = [f"{'fault':{width}s}  {'survived / injected':>19s}  figure (last run)", "-" * (width + 60)]
    for fault in faults:
        r = results[fault.name]
        lines.append(f"{fault.name:{width}s}  {r['survived']:>8d} / {r['injected']:<8d}  {figure(r['cases'])}")
    total_survived = sum(r["survived"] for r in results.values())
    total_injected = sum(r["injected"] for r in results.values())
    lines.append(f"{'all faults':{width}s}  {total_survived:>8d} / {total_injected:<8d}")
    if streak is not None:
        lines.append(f"\nrandom actor kills during learning, {streak['runs']} runs in a row: {streak['passed']} passed "
                     f"(`pytest {RANDOM_KILLS}`, {args.kill_runs} times)")
    if bad is not None:
        lines.append(f"bad inputs with one clear message before the run directory exists: {bad['clear']} / "
                     f"{bad['tried']}" + (f"; not: {', '.join(bad['refused'])}" if bad["refused"] else ""))
    lines.append(f"load average (1 min): {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; "
                 f"{time.monotonic() - started:.0f} s in all, {os.cpu_count()} CPUs")
    print("\n".join(lines))
    out = {"faults": results, "random_kills": streak, "bad_inputs": bad}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
