"""Summarises tricks.sh's rounds: CPU µs a request by process, each variant
against the reference measured beside it (its pairs), the change of the
total, and the spread of that change over the rounds.
usage: tricks.py REFERENCE CLK_TCK ROUNDS.tsv... (runs summed, their rounds kept apart)"""
import csv
import statistics
import sys
from collections import defaultdict

ref, tck, paths = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
tot = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0])  # requests, serve, pg, redis (µs), non-2xx
rounds = defaultdict(dict)  # (scenario, engine, variant, pair) -> round -> total µs a request
rows = [(i, r) for i, path in enumerate(paths) for r in csv.DictReader(open(path), delimiter="\t")]
for run, r in rows:
    n = int(r["requests"] or 0)
    cpu = [int(r["serve_ticks"]) * 1e6 / tck, int(r["pg_ticks"]) * 1e6 / tck, int(r["redis_us"])]
    for k in [(r["scenario"], r["engine"], r["variant"], r["pair"]), (r["scenario"], r["engine"], r["variant"], "*")]:
        t = tot[k]
        t[0] += n
        t[1] += cpu[0]
        t[2] += cpu[1]
        t[3] += cpu[2]
        t[4] += int(r["non2xx"] or 0)
    if n:
        rounds[(r["scenario"], r["engine"], r["variant"], r["pair"])][(run, r["round"])] = sum(cpu) / n


def per_req(k):
    n, s, p, rd, _ = tot[k]
    return s / n, p / n, rd / n


floor = per_req(("me", "floor", "floor", "*"))[0]
print(f"floor GET /v1/me: {floor:.1f} µs/req ({tot[('me', 'floor', 'floor', '*')][0]} requests)\n")
print(f"| scenario | store | variant | serve | PostgreSQL | Redis | total | × floor | vs {ref} beside it | rounds: median (min … max) | requests |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
label = {"me": "GET /v1/me", "list": "GET /v1/ai-agents?limit=100", "patch": "PATCH /v1/ai-agents/{id}"}
store = {"sq": "SQLite", "pg": "PostgreSQL + Redis"}


def row(scen, eng, name, k, change="", spread=""):
    s, p, rd = per_req(k)
    total = s + p + rd
    pg = f"{p:.1f}" if eng == "pg" else "–"
    redis = f"{rd:.1f}" if eng == "pg" else "–"
    bad = f", non-2xx {tot[k][4]}" if tot[k][4] else ""
    print(f"| {label[scen]} | {store[eng]} | {name} | {s:.1f} | {pg} | {redis} | {total:.1f} | {total / floor:.2f} | {change} | {spread} | {tot[k][0]}{bad} |")
    return total


for scen in ["me", "list", "patch"]:
    for eng in ["sq", "pg"]:
        if (scen, eng, ref, "*") not in tot:
            continue
        row(scen, eng, ref + " (all its halves)", (scen, eng, ref, "*"))
        for v in sorted({k[2] for k in tot if k[:2] == (scen, eng) and k[2] != ref}):
            rk, vk = (scen, eng, ref, v), (scen, eng, v, v)
            rs, rp, rr = per_req(rk)
            base = rs + rp + rr
            s, p, rd = per_req(vk)
            change = f"{(s + p + rd - base) / base * 100:+.1f} %"
            ch = sorted((rounds[vk][r] / rounds[rk][r] - 1) * 100 for r in rounds[vk] if r in rounds[rk])
            spread = f"{statistics.median(ch):+.1f} ({ch[0]:+.1f} … {ch[-1]:+.1f}) %"
            row(scen, eng, f"{ref} beside {v}", rk)
            row(scen, eng, f"**{v}**", vk, change, spread)
