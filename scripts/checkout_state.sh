#!/usr/bin/env bash
# The checkout's files as git sees them (changed tracked files, new and
# ignored files; dist/ excepted), to tell whether anything was written into
# the checkout while a build ran from a copy of it (scripts/release.sh).
#   scripts/checkout_state.sh save FILE     writes the state now into FILE
#   scripts/checkout_state.sh compare FILE  exit 0 when unchanged since FILE;
#                                           else names what changed, exit 1
set -euo pipefail
state() { git status --porcelain --ignored --untracked-files=all -- . ':(exclude)dist' | LC_ALL=C sort; }
case "${1:-}" in
  save) state >"$2" ;;
  compare)
    now=$(state)
    before=$(cat "$2")
    [ "$now" = "$before" ] && exit 0
    {
      echo "release: files of the checkout changed while make release ran (git status --porcelain --ignored, dist/ excepted; ?? new, !! ignored, M modified, D deleted):"
      diff <(echo "$before") <(echo "$now") | sed -n 's/^< /  before: /p; s/^> /  after:  /p' || true
      echo "release: make release builds in a copy of the tree: these come from its build (a bug) or from something else run in the checkout meanwhile (pytest's __pycache__ or .pytest_cache, an editor, another make); in that case run make release again"
    } >&2
    exit 1 ;;
  *)
    echo "usage: $0 save|compare FILE" >&2
    exit 2 ;;
esac
