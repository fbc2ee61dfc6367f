#!/bin/bash
# check.sh LEDGER...: the safety check. Per lease: every term's interval [start, last line of
# its token] must not overlap another's, and tokens must increase in start order. Prints one
# summary line per lease and exits 1 on any violation.
awk '
{ ev=$1; lease=$2; host=$3; tok=$4; t=$5+0
  k=lease SUBSEP tok
  if (ev=="start") { if (k in st) { dup[lease]++ } st[k]=t; hostof[k]=host; leases[lease]=1 }
  if (!(k in last) || t>last[k]) last[k]=t
  if (ev=="end"||ev=="term") endev[k]=ev }
END {
  bad=0
  for (l in leases) {
    n=0; delete ts
    for (k in st) { split(k, p, SUBSEP); if (p[1]==l) { n++; ts[n]=k } }
    # sort by start time (insertion sort: small n)
    for (i=2;i<=n;i++){ x=ts[i]; j=i-1; while (j>0 && st[ts[j]]>st[x]) { ts[j+1]=ts[j]; j-- } ts[j+1]=x }
    ov=0; back=0; maxgap=0; killed=0
    for (i=1;i<=n;i++) {
      split(ts[i], a, SUBSEP)
      if (!(ts[i] in endev)) killed++
      if (i>1) { split(ts[i-1], b, SUBSEP)
        if (st[ts[i]] < last[ts[i-1]]) { ov++; printf "OVERLAP %s: token %s (%s) started %.3f before token %s (%s) last seen %.3f\n", l, a[2], hostof[ts[i]], st[ts[i]], b[2], hostof[ts[i-1]], last[ts[i-1]] }
        if (a[2]+0 <= b[2]+0) { back++; printf "TOKEN NOT INCREASING %s: %s after %s\n", l, a[2], b[2] }
        g = st[ts[i]] - last[ts[i-1]]; if (g>maxgap) maxgap=g }
    }
    printf "%s: %d terms, %d overlaps, %d tokens not increasing, %d duplicate starts, %d ended without end/term line, largest handover gap %.2fs\n", l, n, ov, back, dup[l]+0, killed, maxgap
    bad += ov + back + dup[l]
  }
  exit bad>0 }' "$@"
