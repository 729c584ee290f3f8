"""bench/converge.py: the manager's CPU split by mode and the ratios printed for every kthena-py side."""

from __future__ import annotations

import dataclasses
import os

from . import load

converge = load("converge")


def _run(manager_cpu: float) -> object:
    return converge.SideRun(
        elapsed=10.0,
        rss_idle=60.0,
        rss=90.0,
        cpu=20.0,
        pods=800,
        converge_writes=3000.0,
        manager_writes=2000.0,
        manager_event_writes=1000.0,
        restart_writes=0.0,
        restart_breakdown="",
        manager_restart_writes=0.0,
        work=20.0,
        manager_cpu=manager_cpu,
        manager_idle=0.01,
        manager_events=(900, 1000),
    )


def test_the_split_by_mode_is_the_difference_of_two_readings_with_the_kernels_share() -> None:
    assert converge.mode_report((1.0, 0.5), (3.0, 1.0)) == "user 2.0 s, system 0.5 s (20% in the kernel)"
    assert converge.mode_report((1.0, 0.5), (1.0, 0.5)) == "user 0.0 s, system 0.0 s"


def test_a_process_cpu_by_mode_adds_up_to_its_cpu() -> None:
    user, system = converge.cpu_by_mode(os.getpid())
    _, total = converge.proc_stats(os.getpid())
    assert user > 0 and system >= 0
    assert abs((user + system) - total) < 0.1  # read a moment apart


def test_every_other_kthena_py_side_gets_its_ratio_and_paired_ratios() -> None:
    runs = {
        "kthena-py": [_run(2.0), _run(3.0)],
        "kthena-py[python 3.13.0 of May 9 2026]": [_run(1.0), _run(3.0)],
        "kthena-py[--api-connections=32]": [_run(4.0), _run(2.0)],
    }
    lines = converge.manager_cpu_report(100, runs)
    python = [line for line in lines if "/ kthena-py[python 3.13.0" in line]
    flags = [line for line in lines if "/ kthena-py[--api-connections=32]" in line]
    assert len(python) == 1 and "ratio of medians: 1.25" in python[0] and "paired: 2.00 1.00" in python[0]
    assert len(flags) == 1 and "ratio of medians: 0.83" in flags[0] and "paired: 0.50 1.50" in flags[0]
    assert not any("/ kthena-py," in line or line.endswith("/ kthena-py") for line in lines)


def _worked(work: float, manager_cpu: float = 2.0) -> object:
    return dataclasses.replace(_run(manager_cpu), work=work)


def test_the_work_target_and_the_room_it_leaves_above_the_baseline_are_printed() -> None:
    runs = {"kthena-py": [_worked(90.0, 14.0), _worked(100.0, 16.0)], "kthena-go": [_worked(120.0), _worked(120.0)]}
    lines = converge.work_report(500, runs, [80.0, 82.0])
    ratio = [line for line in lines if line.startswith("  work ratio to kthena-go")]
    assert len(ratio) == 1 and "kthena-py 0.79" in ratio[0] and "baseline 0.68" in ratio[0]
    assert "target for kthena-py <= 0.8 (issue 33)" in ratio[0]
    room = [line for line in lines if "leaves a controller" in line]
    # 0.8 x 120 - 81 = 15.0 s of room; kthena-py caused 95 - 81 = 14.0 s, its manager 15.0 s (medians)
    assert room == [
        "  work the target leaves a controller above the baseline: 15.0 s; kthena-py caused 14.0 s, "
        "its manager's own CPU 15.0 s of it; kthena-go caused 39.0 s (kthena-py / kthena-go above the baseline: 0.36)"
    ]


def test_without_a_baseline_no_room_is_printed_and_at_100_the_target_is_the_smaller_one() -> None:
    runs = {"kthena-py": [_worked(18.0)], "kthena-go": [_worked(24.0)]}
    lines = converge.work_report(100, runs, [])
    assert any("target for kthena-py <= 0.75 (issue 33)" in line for line in lines)
    assert not any("leaves a controller" in line for line in lines)


def test_our_stored_events_are_also_set_against_the_events_go_handed_to_its_recorder() -> None:
    ours = [dataclasses.replace(_run(2.0), manager_events=(900, 1000)) for _ in range(2)]
    go = [dataclasses.replace(_run(1.0), manager_events=(100, 250), events_handed=n) for n in (800, 800)]
    lines = converge.manager_cpu_report(100, {"kthena-py": ours, "kthena-go": go})
    assert "  own Events stored once settled, kthena-py / kthena-go: 4.00 (target <= 1.5)" in lines
    handed = [line for line in lines if "kthena-go's handed to its recorder" in line]
    assert len(handed) == 1 and ": 1.25 (" in handed[0]


def test_without_go_s_log_count_no_handed_ratio_is_printed() -> None:
    go = [_run(1.0)]
    lines = converge.manager_cpu_report(100, {"kthena-py": [_run(2.0)], "kthena-go": go})
    assert not any("handed" in line for line in lines)
