#!/usr/bin/env bash
# pipe_grep_q.sh SOURCE_DIR: fails when a shell script of the project that sets pipefail
# pipes into `grep -q` (or --quiet, -m1 ... -q and the like) in its own shell.
#
# Why: grep -q exits at its first match; the command before it dies of SIGPIPE on its next
# write, and under pipefail the pipeline's status is that 141, so a match reads as a miss.
# Whether the writer had finished before grep -q exited depends on timing and on how much
# it writes, so such a check passes most runs and fails some (failover_cut_continue failed
# CI this way). Count instead (grep -c ... >/dev/null, or [ "$(... | grep -c ...)" -gt 0 ]),
# or test a captured string. A pipeline inside `bash -c "..."` runs in a shell without
# pipefail and is left alone.
set -uo pipefail
src=${1:?usage: pipe_grep_q.sh SOURCE_DIR}
cd "$src" || exit 2
bad=0 n=0
while IFS= read -r -d '' f; do
  grep -q "pipefail" "$f" || continue
  n=$((n + 1))
  # Drop comment lines, then look for "| grep <options with q>" and "| grep --quiet".
  hits=$(grep -nE '(^|[^|])\|[[:space:]]*grep([[:space:]]+-[A-Za-z]+)*[[:space:]]+(-[A-Za-pr-z]*q[A-Za-z]*|--quiet|--silent)\b' "$f" |
    grep -vE '^[0-9]+:[[:space:]]*#' | grep -v 'bash -c')
  if [ -n "$hits" ]; then
    while IFS= read -r h; do echo "pipe_grep_q.sh: $f:$h"; done <<<"$hits"
    bad=$((bad + 1))
  fi
done < <(find contrib perf tests lab -name '*.sh' -type f -print0 2>/dev/null; \
  find contrib -maxdepth 1 -type f ! -name '*.*' -print0 2>/dev/null)
[ "$n" -gt 0 ] || { echo "pipe_grep_q.sh: no script with pipefail found under $src (wrong directory?)"; exit 2; }
if [ "$bad" -gt 0 ]; then
  echo "pipe_grep_q.sh: FAIL: $bad script(s) pipe into grep -q under pipefail (count with grep -c instead)"
  exit 1
fi
echo "pipe_grep_q.sh: PASS: $n script(s) with pipefail, none pipes into grep -q"
