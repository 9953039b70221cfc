# Sourced by run_all.sh and run_tests.sh: where the TinyStories text is (notebooks 08-09, tests).
# $RT_TINYSTORIES wins when set.  Else the first folder found of: data/tinystories/ in this
# checkout (put downloaded text there); shared/data/tinystories/ beside this checkout or beside
# any folder above it (the project's real excerpts, see SOURCE.md there); the same beside the
# repository this one was cloned from.  The library itself only reads the path it is given or
# $RT_TINYSTORIES; nothing in rt_lib knows these places.
if [ -z "${RT_TINYSTORIES:-}" ]; then
  _rt_candidates=("$PWD/data/tinystories")
  _rt_dir=$PWD
  while [ "$_rt_dir" != "/" ]; do
    _rt_dir=$(dirname "$_rt_dir")
    _rt_candidates+=("$_rt_dir/shared/data/tinystories")
  done
  _rt_origin=$(git config --get remote.origin.url 2>/dev/null || true)
  if [ -n "$_rt_origin" ] && [ -d "$_rt_origin" ]; then
    _rt_candidates+=("$(cd "$_rt_origin/.." && pwd)/shared/data/tinystories")
  fi
  for _rt_candidate in "${_rt_candidates[@]}"; do
    if [ -d "$_rt_candidate" ]; then
      export RT_TINYSTORIES="$_rt_candidate"
      break
    fi
  done
  unset _rt_candidates _rt_dir _rt_origin _rt_candidate
fi
