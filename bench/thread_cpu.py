#!/usr/bin/env python3
"""CPU time of each thread of one Sluice run: which thread sets the pace,
and how much of the two vCPUs the others leave. Reads
/proc/PID/task/*/stat every 5 ms while the command runs and prints a
Markdown table of each thread's user and system seconds as last seen (up
to 5 ms short of the end), the whole process's exact figures, and the
run's wall time. `{out}` in the
arguments is replaced by a scratch directory; with --drain,
bench/tap_drain.py reads every interface `sluice abstract --dir {out}`
creates, as bench/abstract.sh has it, and its own CPU is printed too.

A sampler in Python, not a shell loop: forking a process every few
milliseconds would itself take a good share of two vCPUs.

usage: bench/thread_cpu.py SLUICE [--drain] -- ARGS...
e.g.:  bench/thread_cpu.py target/release/sluice --drain -- abstract -r conns.pcap --dir {out} --wait
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ab import split_args

TICK = os.sysconf("SC_CLK_TCK")


def threads(pid):
    """{tid: (name, user s, system s)} of a running process."""
    seen = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:  # the process has ended
        return seen
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        # The name is in parentheses and may hold spaces.
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        seen[tid] = (name, int(fields[11]) / TICK, int(fields[12]) / TICK)
    return seen


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sluice")
    ap.add_argument("--drain", action="store_true", help="a bench/tap_drain.py consumer on {out}")
    args, sluice_args = split_args(ap, "Sluice's arguments")
    if not os.access(args.sluice, os.X_OK):
        sys.exit(f"thread_cpu.py: {args.sluice} is not an executable")

    work = tempfile.mkdtemp(prefix="sluice-threads-")
    out = os.path.join(work, "out")
    drain = None
    try:
        if args.drain:
            here = os.path.dirname(os.path.abspath(__file__))
            drain = subprocess.Popen([sys.executable, os.path.join(here, "tap_drain.py"), out], stdout=subprocess.DEVNULL)
        cmd = [args.sluice] + [a.replace("{out}", out) for a in sluice_args]
        start = time.perf_counter()
        process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        last = {}
        while True:
            # wait4 rather than poll: it gives the exact CPU of the whole run.
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                process.returncode = os.waitstatus_to_exitcode(status)
                break
            try:
                last.update(threads(process.pid))
            except (FileNotFoundError, ProcessLookupError):
                pass
            time.sleep(0.005)
        wall = time.perf_counter() - start
        if process.returncode != 0:
            sys.exit(f"thread_cpu.py: {' '.join(cmd)} exited with status {process.returncode}")
        drained = None
        if drain is not None:
            _, status, drain_usage = os.wait4(drain.pid, 0)
            drain.returncode = os.waitstatus_to_exitcode(status)
            if drain.returncode != 0:
                sys.exit("thread_cpu.py: the drain failed")
            drained = (drain_usage.ru_utime, drain_usage.ru_stime)
    finally:
        if drain is not None and drain.returncode is None:
            drain.kill()
            drain.wait()
        shutil.rmtree(work, ignore_errors=True)

    print(f"`{' '.join(sluice_args)}`: {wall:.3f} s of wall time.\n")
    print("| thread | user s | system s | CPU s |")
    print("|---|---:|---:|---:|")
    for name, user, system in sorted(last.values(), key=lambda t: -(t[1] + t[2])):
        print(f"| {name} | {user:.2f} | {system:.2f} | {user + system:.2f} |")
    print(f"| sluice, all threads (exact) | {usage.ru_utime:.2f} | {usage.ru_stime:.2f} | {usage.ru_utime + usage.ru_stime:.2f} |")
    if drained is not None:
        print(f"| tap_drain.py | {drained[0]:.2f} | {drained[1]:.2f} | {drained[0] + drained[1]:.2f} |")

if __name__ == "__main__":
    main()
