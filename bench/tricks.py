"""Summarises tricks.sh's rounds: CPU µs a request by process, each variant
against the reference in the same scenario, and the spread of that change
over the rounds. usage: tricks.py ROUNDS.tsv REFERENCE CLK_TCK"""
import csv
import sys
from collections import defaultdict

path, ref, tck = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = list(csv.DictReader(open(path), delimiter="\t"))
tot = defaultdict(lambda: [0, 0, 0, 0, 0])  # requests, serve, pg, redis (µs), non-2xx
per_round = defaultdict(dict)  # (scenario, engine, variant) -> round -> total µs/req
for r in rows:
    n = int(r["requests"] or 0)
    serve, pg = int(r["serve_ticks"]) * 1e6 / tck, int(r["pg_ticks"]) * 1e6 / tck
    redis = int(r["redis_us"])
    k = (r["scenario"], r["engine"], r["variant"])
    t = tot[k]
    t[0] += n; t[1] += serve; t[2] += pg; t[3] += redis; t[4] += int(r["non2xx"] or 0)
    if n:
        per_round[k][r["round"]] = (serve + pg + redis) / n


def per_req(k):
    n, s, p, rd, _ = tot[k]
    return s / n, p / n, rd / n


fk = ("me", "floor", "floor")
floor = per_req(fk)[0]
print(f"floor GET /v1/me: {floor:.1f} µs/req ({tot[fk][0]} requests)")
print()
print("| scenario | store | variant | serve | PostgreSQL | Redis | total | ×floor | vs " + ref + " | per-round spread | requests |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
scen_order = {"me": 0, "list": 1, "patch": 2}
keys = sorted({(k[0], k[1]) for k in tot if k[1] != "floor"}, key=lambda k: (scen_order.get(k[0], 9), k[1]))
label = {"me": "GET /v1/me", "list": "GET /v1/ai-agents?limit=100", "patch": "PATCH /v1/ai-agents/{id}"}
for scen, eng in keys:
    rk = (scen, eng, ref)
    rs, rp, rr = per_req(rk)
    rtot = rs + rp + rr
    variants = [k[2] for k in tot if k[0] == scen and k[1] == eng]
    variants.sort(key=lambda v: (v != ref, v))
    for v in variants:
        k = (scen, eng, v)
        s, p, rd = per_req(k)
        total = s + p + rd
        change, spread = "", ""
        if v != ref:
            change = f"{(total - rtot) / rtot * 100:+.1f} %"
            ch = [(per_round[k][r] - per_round[rk][r]) / per_round[rk][r] * 100
                  for r in per_round[k] if r in per_round[rk]]
            ch.sort()
            spread = f"{ch[0]:+.1f} … {ch[-1]:+.1f} % (median {ch[len(ch) // 2]:+.1f})"
        bad = f", non-2xx {tot[k][4]}" if tot[k][4] else ""
        store = "SQLite" if eng == "sq" else "PostgreSQL + Redis"
        pgc = f"{p:.1f}" if eng == "pg" else "–"
        rdc = f"{rd:.1f}" if eng == "pg" else "–"
        print(f"| {label[scen]} | {store} | {v} | {s:.1f} | {pgc} | {rdc} | {total:.1f} | {total / floor:.2f} | {change} | {spread} | {tot[k][0]}{bad} |")
