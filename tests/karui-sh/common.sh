# common.sh: what compare.sh and posix.sh share, sourced once they have set
# ksh (karui-sh's absolute path), stages (KARUI_SH_STAGES) and emu (the
# emulator, if any).
#
#   skip_without_uprocs   under stages=uproc, exits 77 ("skipped") where
#                         karui-sh says it cannot run μprocesses here
#   $root, $dir           a directory removed at exit, and the directory a
#                         case runs in
#   fresh_files           $dir made afresh with the files every case finds
#   run_in_dir NAME CMD.. CMD in $dir with a fixed environment (and the
#                         sanitizer's options of an ASan build): its stdout,
#                         stderr and status in $root/NAME.out, .err, .status

skip_without_uprocs() {
	if [ "$stages" = uproc ] &&
	   ! why=$(env KARUI_SH_STAGES=uproc $emu "$ksh" -c /bin/true 2>&1); then
		echo "skipped: no μprocesses here: $why"
		exit 77
	fi
}

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dir=$root/t

fresh_files() {
	rm -rf "$dir"
	mkdir -p "$dir/sub" "$dir/home"
	printf 'alpha\nbeta\ngamma\nbeta\n' >"$dir/a.txt"
	printf 'one two three\nfour five six\n' >"$dir/b.txt"
	printf 'in sub\n' >"$dir/sub/c.txt"
}

run_in_dir() {
	_name=$1
	shift
	(cd "$dir" && env -i PATH=/usr/bin:/bin HOME="$dir/home" LC_ALL=C X=exported \
		KARUI_SH_STAGES="$stages" ${LSAN_OPTIONS:+LSAN_OPTIONS="$LSAN_OPTIONS"} \
		"$@" >"$root/$_name.out" 2>"$root/$_name.err")
	echo $? >"$root/$_name.status"
}
