"""Instructions a thread issues on the common path of a kernel's K-tile loop,
from `cuobjdump -sass` output: basic blocks between the loop head (target
of the back branch that closes the loop holding the tile BAR.SYNC) and that
back branch; inner back
edges taken zero times (their bodies run once, as the page-stepping loop does
at ps 16); the path the fewest instructions long among those that issue
`hgmma` HGMMAs and `ldgsts` LDGSTS (the full tile: no mask, no rescale, no
edge).

  cuobjdump -sass OBJ > k.sass
  (the build machine's CUDA has no cuobjdump: `pip download --no-deps
  nvidia-cuda-cuobjdump` and unzip the wheel; its nvidia/cu13/bin has it)
  python3 bench/sass_tile_loop.py k.sass NAME_PART HGMMAS LDGSTS
e.g. attend_prefill_wgmma_leanILi128ELi16E 24 16 (D 128: 8 S + 8 P V + 8
row-sum wgmmas, 16 copies), attend_prefill_wgmmaILi128ELb1E 16 16.
"""
import re, sys, collections, functools
path, fname, need_hg, need_ld = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
text = open(path).read()
parts = text.split("Function : ")
body = next(p for p in parts[1:] if fname in p.split("\n")[0])
ins = []
for line in body.split("\n"):
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
    if m:
        ins.append((int(m.group(1), 16), m.group(2).strip()))
idx = {a: i for i, (a, _) in enumerate(ins)}
def target(t):
    m = re.search(r"BRA(?:\.\S+)?\s+(?:`\(\S+\)\s*)?0x([0-9a-f]+)", t)
    return int(m.group(1), 16) if m else None
bar = [i for i, (a, t) in enumerate(ins) if t.startswith("BAR.SYNC") or " BAR.SYNC" in t]
# the loop: a back branch whose range holds the first BAR.SYNC and HGMMAs
loops = []
for i, (a, t) in enumerate(ins):
    tg = target(t) if "BRA" in t else None
    if tg is not None and tg < a:
        j = idx[tg]
        hg = sum("HGMMA" in x for _, x in ins[j:i + 1])
        if any(j <= b <= i for b in bar) and hg:
            loops.append((j, i, hg))
j0, i1, _ = min(loops, key=lambda l: l[1] - l[0])
INF = 10**9
@functools.lru_cache(None)
def best(i, hg, ld):
    """fewest instructions from i to the back branch i1 (inclusive) with hg / ld still to issue"""
    if i > i1 or i < j0:
        return INF
    a, t = ins[i]
    hg2 = max(0, hg - ("HGMMA" in t))
    ld2 = max(0, ld - ("LDGSTS" in t))
    if i == i1:
        return 1 if hg2 == 0 and ld2 == 0 else INF
    tg = target(t) if "BRA" in t else None
    opts = []
    cond = t.startswith("@")
    if tg is not None and tg > a:
        opts.append(best(idx[tg], hg2, ld2))
    if tg is None or cond or tg <= a:  # fall through (inner back edges not taken)
        if "EXIT" in t and not cond:
            return INF
        opts.append(best(i + 1, hg2, ld2))
    m = min(opts)
    return INF if m >= INF else m + 1
sys.setrecursionlimit(100000)
n = best(j0, need_hg, need_ld)
# reconstruct the path's opcodes
ops = collections.Counter()
i, hg, ld = j0, need_hg, need_ld
while True:
    a, t = ins[i]
    op = re.sub(r"^@!?U?P\w+\s+", "", t).split()[0]
    ops[op] += 1
    hg2 = max(0, hg - ("HGMMA" in t)); ld2 = max(0, ld - ("LDGSTS" in t))
    if i == i1: break
    tg = target(t) if "BRA" in t else None
    cands = []
    if tg is not None and tg > a: cands.append(idx[tg])
    if tg is None or t.startswith("@") or tg <= a: cands.append(i + 1)
    i = min(cands, key=lambda c: best(c, hg2, ld2)); hg, ld = hg2, ld2
print(f"{fname}: loop {hex(ins[j0][0])}..{hex(ins[i1][0])} ({i1 - j0 + 1} static), common path {n} instructions")
print("  ", ", ".join(f"{k} {v}" for k, v in ops.most_common()))
