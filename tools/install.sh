#!/bin/sh
# make install and make uninstall (Makefile). install copies the library, the tools and the Python
# hook under DESTDIR + PREFIX and records, in PREFIX/share/ncclguard/install-manifest, each file it
# wrote ("f PATH") and each directory it created ("d PATH"), PATH without DESTDIR. uninstall reads
# that record back: it removes those files and the record, then those directories when they are
# empty; nothing else. Installing again keeps the entries of the earlier record that still exist, so
# that a directory the first install created is still removed.
#
# Usage: tools/install.sh install DESTDIR PREFIX ITEM...
#        tools/install.sh uninstall DESTDIR PREFIX
# ITEM: "file MODE SRC DIR" (SRC into PREFIX/DIR, same name) or "tree MODE SRCDIR DIR" (every
# regular file under SRCDIR into PREFIX/DIR, its layout kept; no __pycache__, *.pyc, *.tmp).
set -euf

prog=ncclguard
die() { echo "$prog: $*" >&2; exit 1; }
[ $# -ge 3 ] || die "usage: $0 install|uninstall DESTDIR PREFIX [ITEM...]"
action=$1 dest=$2 prefix=$3
shift 3
case "$prefix" in '') die "PREFIX is empty" ;; /) ;; *) prefix=${prefix%/} ;; esac
share="${prefix%/}/share/ncclguard"
manifest="$share/install-manifest"
nl='
'
tab=$(printf '\t')

made="" # the directories created, parents first, one a line
# mkdirs DIR: DIR (a path without DESTDIR) and its missing parents; each one created goes into $made
mkdirs() {
  md_d=$1 md_chain=""
  while [ "$md_d" != / ] && [ "$md_d" != . ] && [ ! -d "$dest$md_d" ]; do
    md_chain="$md_d$nl$md_chain"
    md_d=$(dirname -- "$md_d")
  done
  md_ifs=$IFS; IFS=$nl
  for md_c in $md_chain; do mkdir -- "$dest$md_c"; done
  IFS=$md_ifs
  made="$made$md_chain"
}

case "$action" in
install)
  # the files: "MODE<TAB>SRC<TAB>PATH" lines, PATH below PREFIX
  files=""
  while [ $# -gt 0 ]; do
    [ $# -ge 4 ] || die "incomplete item: $*"
    kind=$1 mode=$2 src=$3 dir=$4
    shift 4
    case "$kind" in
      file)
        [ -f "$src" ] || die "$src: no such file (run make first)"
        files="$files$mode$tab$src$tab$dir/$(basename -- "$src")$nl" ;;
      tree)
        [ -d "$src" ] || die "$src: no such directory"
        list=$(cd "$src" && find . -name __pycache__ -prune -o -type f ! -name '*.pyc' ! -name '*.tmp' -print | sed 's|^\./||' | LC_ALL=C sort)
        IFS=$nl
        for rel in $list; do files="$files$mode$tab$src/$rel$tab$dir/$rel$nl"; done
        IFS=" $tab$nl" ;;
      *) die "unknown item '$kind' (file or tree)" ;;
    esac
  done
  [ -z "$dest" ] || mkdir -p -- "$dest"
  # the directories first, then the record, then the files (so that an install cut short is in it)
  mkdirs "$share"
  IFS=$nl
  for l in $files; do mkdirs "$(dirname -- "${prefix%/}/${l##*"$tab"}")"; done
  IFS=" $tab$nl"
  old=""
  if [ -f "$dest$manifest" ]; then
    while IFS= read -r l; do
      case "$l" in
        "f "*) if [ -f "$dest${l#f }" ] || [ -L "$dest${l#f }" ]; then old="$old$l$nl"; fi ;;
        "d "*) if [ -d "$dest${l#d }" ]; then old="$old$l$nl"; fi ;;
      esac
    done <"$dest$manifest"
  fi
  new=""
  IFS=$nl
  for d in $made; do new="${new}d $d$nl"; done
  for l in $files; do new="${new}f ${prefix%/}/${l##*"$tab"}$nl"; done
  IFS=" $tab$nl"
  printf '%s%s' "$old" "$new" | awk '!seen[$0]++' >"$dest$manifest.tmp"
  mv -f -- "$dest$manifest.tmp" "$dest$manifest"
  n=0
  IFS=$nl
  for l in $files; do
    m=${l%%"$tab"*} r=${l#*"$tab"}
    install -m "$m" -- "${r%%"$tab"*}" "$dest${prefix%/}/${r#*"$tab"}"
    n=$((n + 1))
  done
  IFS=" $tab$nl"
  echo "$prog: installed $n files under $dest$prefix; make uninstall (the same PREFIX and DESTDIR) removes them"
  ;;
uninstall)
  [ -f "$dest$manifest" ] || die "nothing to uninstall: no $dest$manifest (give make uninstall the PREFIX and DESTDIR of make install; an install made before make uninstall existed has no such record: make install once more, then make uninstall)"
  files="" dirs=""
  while IFS= read -r l; do
    case "$l" in
      "f "*) files="$files${l#f }$nl" ;;
      "d "*) dirs="$dirs${l#d }$nl" ;;
    esac
  done <"$dest$manifest"
  n=0
  IFS=$nl
  for f in $files; do
    if [ -f "$dest$f" ] || [ -L "$dest$f" ]; then rm -f -- "$dest$f"; n=$((n + 1)); fi
  done
  IFS=" $tab$nl"
  rm -f -- "$dest$manifest"
  # the directories it created, children first, each only when empty
  kept=""
  IFS=$nl
  for d in $(printf '%s' "$dirs" | LC_ALL=C sort -r); do
    [ -d "$dest$d" ] || continue
    rmdir -- "$dest$d" 2>/dev/null || kept="$kept $dest$d"
  done
  IFS=" $tab$nl"
  echo "$prog: removed $n files under $dest$prefix${kept:+ (not empty, kept:$kept)}"
  ;;
*) die "unknown action '$action' (install or uninstall)" ;;
esac
