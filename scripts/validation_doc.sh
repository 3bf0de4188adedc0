#!/usr/bin/env bash
# validation_doc.sh — regenerates the tables of docs/validation.md: the part between its
# "npusim validate --markdown" markers becomes the output of `npusim validate --markdown`
# (every suite's rows, ours beside published, statistics and sources). The rest of the
# document is prose and stays.
#
#   scripts/validation_doc.sh                 run the whole validation (two hours of one core: every
#                                             training row simulates a step; -j $JOBS, default
#                                             every core) and splice
#   scripts/validation_doc.sh R.json ...      splice the rows of earlier `npusim validate --json`
#                                             runs of this tree (any rows each, e.g. one job per
#                                             --row; `npusim validate --results`); a row none of
#                                             them holds is shown as not run
#
# tests/test_validate.c fails when the document is stale: a row, a published figure or a
# source that the data files no longer have, or a quick-subset row whose simulated figures
# changed.
set -euo pipefail
cd "$(dirname "$0")/.."

npusim=${NPUSIM:-build/sim/npusim}
doc=docs/validation.md
begin='<!-- npusim validate --markdown: begin (scripts/validation_doc.sh writes what follows) -->'
end='<!-- npusim validate --markdown: end -->'

tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.doc"' EXIT
if (($#)); then
  args=()
  for r in "$@"; do args+=(--results "$r"); done
  "$npusim" validate --markdown "${args[@]}" >"$tmp"
else
  "$npusim" validate -j "${JOBS:-$(nproc)}" --markdown >"$tmp"
fi
grep -qxF "$begin" "$doc" && grep -qxF "$end" "$doc" || {
  echo "validation_doc.sh: $doc has no begin and end markers" >&2
  exit 2
}
awk -v b="$begin" -v e="$end" -v f="$tmp" '
  $0 == b { print; print ""; while ((getline line < f) > 0) print line; skip = 1; next }
  $0 == e { skip = 0 }
  !skip { print }
' "$doc" >"$tmp.doc"
mv "$tmp.doc" "$doc"
echo "validation_doc.sh: $doc regenerated"
