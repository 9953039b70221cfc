"""``./run_all.sh``'s dispatch replayed on the wall times recorded in the committed notebooks.

    .venv/bin/python benchmarks/dispatch_plan.py [jobs=2]

The runner hands notebooks out in :func:`rt_lib.pipeline.plan.schedule`'s order (longest critical path
first, each once the notebooks it reads have finished), ``jobs`` at a time.  This replays that
dispatch with each notebook taking its recorded time (papermill's ``duration``), and prints when
each starts and ends, the total, and how long a lane sat idle.  Set-up time is not included.
A notebook recorded from cached runs (a re-run that trained nothing) records seconds, not its
training time: the replay, like the runner, then starts it too late.
"""

from __future__ import annotations

import sys

from rt_lib.pipeline.plan import available_notebooks, recorded_seconds, schedule
from rt_lib.pipeline.registry import registry


def main(argv: list[str]) -> None:
    jobs = 2
    for kv in argv:
        key, _, raw = kv.partition("=")
        if key != "jobs":
            raise SystemExit(f"unknown setting {key!r}; settings: ['jobs']")
        jobs = int(raw)
    names = sorted(registry())
    deps, order = schedule(names)
    books = available_notebooks()
    seconds = {n: recorded_seconds(books[n]) for n in names}
    lanes = [0.0] * jobs  # when each lane is next free
    end: dict[str, float] = {}
    pending = list(order)
    while pending:
        lane = min(range(jobs), key=lanes.__getitem__)
        now = lanes[lane]
        ready = [n for n in pending if all(d in end and end[d] <= now for d in deps[n])]
        if not ready:  # wait for the next reader's input to finish
            lanes[lane] = min(t for d, t in end.items() if t > now)
            continue
        name = ready[0]
        pending.remove(name)
        end[name] = now + seconds[name]
        lanes[lane] = end[name]
        print(f"lane {lane}: {now / 60:6.1f} -> {end[name] / 60:6.1f} min  {name} "
              f"({seconds[name]:.0f} s)")
    total, work = max(end.values()), sum(seconds.values())
    print(f"total {total / 60:.1f} min on {jobs} lanes; {work / 60:.1f} min of notebook time; "
          f"lanes idle {(jobs * total - work) / 60:.1f} min")


if __name__ == "__main__":
    main(sys.argv[1:])
