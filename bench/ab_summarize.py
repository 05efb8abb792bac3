"""Summarises bench/ab_before_after.sh's log: per benchmark, the median raw
time and the median same-run ratio of each build, and after/before."""
import re,statistics as st,sys
cur=None; data={}
for line in open(sys.argv[1]):
    m=re.match(r'=== round (\d) (\w+) (\w+)',line)
    if m: cur=(m.group(2),m.group(3)); continue
    m=re.match(r'(adamw_\w+): ([\d.]+) ms/step.*ratio ([\d.]+)',line)
    if m: data.setdefault((cur[0],m.group(1)),[]).append((float(m.group(2)),float(m.group(3))))
    m=re.match(r'(\w+): ds_step ([\d.]+) ms, bare dsk_adam_step ([\d.]+) ms, ratio ([\d.]+)',line)
    if m: data.setdefault((cur[0],'step_'+m.group(1)),[]).append((float(m.group(2)),float(m.group(4))))
names=sorted(set(k[1] for k in data))
print(f"| bench | before ms | after ms | after/before ms | before ratio | after ratio | after/before ratio | rounds |")
print("|---|---|---|---|---|---|---|---|")
for n in names:
    b=data[('before',n)]; a=data.get(('after',n),[])
    if not a: continue
    bm=st.median(x[0] for x in b); am=st.median(x[0] for x in a)
    br=st.median(x[1] for x in b); ar=st.median(x[1] for x in a)
    print(f"| {n} | {bm:.1f} | {am:.1f} | {am/bm:.3f} | {br:.3f} | {ar:.3f} | {ar/br:.3f} | {min(len(a),len(b))} |")
