#!/usr/bin/env python3
"""Markdown tables for bench/record.sh from its steps.tsv."""
import argparse

p = argparse.ArgumentParser()
p.add_argument("steps")
p.add_argument("--live-record", default="no")
p.add_argument("--step-secs", default="?")
p.add_argument("--tcpdump-b", default="?")
a = p.parse_args()

COLS = ["profile", "tool", "rate", "sent", "secs", "captured", "drops",
        "cpu_u", "cpu_s", "written", "waits", "mode", "send_errors"]
rows = []
for line in open(a.steps):
    f = line.rstrip("\n").split("\t")
    if len(f) != len(COLS):
        continue
    r = dict(zip(COLS, f))
    r["sent"] = int(r["sent"])
    r["secs"] = float(r["secs"])
    r["captured"] = int(r["captured"])
    r["kpps"] = r["sent"] / r["secs"] / 1e3
    r["lossless"] = r["captured"] >= r["sent"] and r["drops"] == "0"
    rows.append(r)

live_name = "sluice live + --record" if a.live_record == "yes" else "sluice live (no recording)"
NAMES = {
    "sluice-record": "sluice record",
    "tcpdump": f"tcpdump -w (-B {a.tcpdump_b})",
    "tcpdump-default": "tcpdump -w (default buffer)",
    "suricata": "suricata (af-packet)",
    "sluice-live": live_name,
}


def step_name(r):
    return "max" if r["rate"] == "max" else f"{r['rate']} kpps"


def summary(profile, tool):
    """(top loss-free row or None, first lossy row or None)."""
    rs = [r for r in rows if r["profile"] == profile and r["tool"] == tool]
    good = [r for r in rs if r["lossless"]]
    bad = [r for r in rs if not r["lossless"]]
    # the highest rate the sender achieved in a loss-free step (paced steps
    # may fall short of their target, so this is not always the last one)
    return (max(good, key=lambda r: r["kpps"]) if good else None), (bad[0] if bad else None), rs


def fmt_lossy(r):
    if r is None:
        return "none (no loss at any step)"
    return (f"{step_name(r)}: sent {r['kpps']:.0f} kpps, captured "
            f"{r['captured']:,}/{r['sent']:,}, kernel drops {r['drops']}")


profiles = list(dict.fromkeys(r["profile"] for r in rows))
tools = list(dict.fromkeys(r["tool"] for r in rows))
result = {}  # (profile, tool) -> (rate_kpps, is_lower_bound)

for profile in profiles:
    print(f"#### Loss-free rate, `{profile}` profile\n")
    print("| receiver | loss-free step with the highest sent rate | that rate | first step with loss "
          "| CPU at the top loss-free step (user+sys per packet) |")
    print("|---|---|--:|---|--:|")
    for tool in tools:
        good, bad, _ = summary(profile, tool)
        if good is None:
            print(f"| {NAMES.get(tool, tool)} | none | - | {fmt_lossy(bad)} | - |")
            result[(profile, tool)] = (0.0, False)
            continue
        lower = bad is None
        cpu = (float(good["cpu_u"]) + float(good["cpu_s"])) / good["sent"] * 1e6
        rate = f"{'≥ ' if lower else ''}{good['kpps']:.0f} kpps"
        print(f"| {NAMES.get(tool, tool)} | {step_name(good)} | {rate} | {fmt_lossy(bad)} "
              f"| {cpu:.2f} µs |")
        result[(profile, tool)] = (good["kpps"], lower)
    print()

print("#### Ratios\n")
print("| profile | comparison | ratio |")
print("|---|---|---|")


def ratio(profile, t1, t2):
    if (profile, t1) not in result or (profile, t2) not in result:
        return "not measured"
    (r1, lb1), (r2, lb2) = result[(profile, t1)], result[(profile, t2)]
    if r1 == 0 or r2 == 0:
        return "not measurable (no loss-free step)"
    if lb1 and lb2:
        return (f"not measurable: both recorded every packet at the sender's maximum "
                f"({r1:.0f} and {r2:.0f} kpps); the sender is the limit")
    if lb1 and not lb2:
        return f"≥ {r1 / r2:.2f} ({NAMES[t1]} never lost a packet; sender-limited)"
    if lb2 and not lb1:
        return f"≤ {r1 / r2:.2f} ({NAMES[t2]} never lost a packet)"
    return f"{r1 / r2:.2f}"


for profile in profiles:
    for t1, t2 in [("sluice-record", "tcpdump"), ("sluice-record", "tcpdump-default"),
                   ("sluice-record", "suricata"),
                   ("sluice-live", "sluice-record")]:
        if t1 in tools and t2 in tools:
            print(f"| {profile} | {NAMES[t1]} / {NAMES[t2]} | {ratio(profile, t1, t2)} |")
print()

print(f"Steps of {a.step_secs} s; a step is loss-free when the receiver captured every frame "
      "the generator sent and its kernel counter shows no drop.")
