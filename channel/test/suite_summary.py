#!/usr/bin/env python3
# suite_summary.py - pass/total per directory of an MPICH test-suite run
# from runtests' (possibly partial) junit file; lists the failed tests.
import re, sys, collections
text = open(sys.argv[1]).read()
tot = collections.Counter(); ok = collections.Counter(); bad = []
# runtests writes <testcase name=" - ./dir/prog np args" ...> ... </testcase>
# (from MPICH 4.3 with a classname="dir" before the name)
for m in re.finditer(r'<testcase\b[^>]*?\bname="([^"]*)"[^>]*?(/>|>(.*?)</testcase>)', text, re.S):
    name, body = m.group(1), m.group(3) or ''
    d = re.search(r'\./([^/ ]+)/', name)
    d = d.group(1) if d else '?'
    if '<skipped' in body:
        continue
    tot[d] += 1
    if '<failure' in body or '<error' in body:
        bad.append(name.replace(' - ./', '').strip())
    else:
        ok[d] += 1
for d in sorted(tot):
    print("  %-10s %4d / %4d" % (d, ok[d], tot[d]))
print("  %-10s %4d / %4d" % ("total", sum(ok.values()), sum(tot.values())))
for b in bad:
    print("  FAILED:", b)
