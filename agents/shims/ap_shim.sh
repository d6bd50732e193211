#!/bin/sh
# autopatch's runner shim, written by the host first on PATH for one Tester run. It runs the
# real program of its name (the next one on PATH) so that a test runner, whatever wraps it,
# runs its whole suite and writes per-test results into $AP_REPORT_DIR.
n=${0##*/}
me=${0%/*}
real=
o=$IFS
IFS=:
for p in $PATH; do
	if [ -n "$p" ] && [ "$p" != "$me" ] && [ -f "$p/$n" ] && [ -x "$p/$n" ]; then
		real=$p/$n
		break
	fi
done
IFS=$o
if [ -z "$real" ]; then
	echo "$n: command not found" >&2
	exit 127
fi
R=${AP_REPORT_DIR:-}
if [ -z "$R" ] || [ ! -d "$R" ]; then
	exec "$real" "$@"
fi
f=$R/$n.$$.$(date +%s%N)
# Run "$@" with its output (stderr too when $1 is 2) copied into file $2; keep its status.
tee_run() {
	if [ "$1" = 2 ]; then
		shift
		t=$1
		shift
		{ "$@" 2>&1; echo $? > "$t.rc"; } | tee "$t"
	else
		shift
		t=$1
		shift
		{ "$@"; echo $? > "$t.rc"; } | tee "$t"
	fi
	s=$(cat "$t.rc" 2>/dev/null)
	rm -f "$t.rc"
	exit "${s:-1}"
}
# Run "$@", then copy the JUnit files it wrote in the tree (paths matching the -path patterns
# in $P, newer than its start; regular files only, never a link) into the report directory;
# keep its status. Surefire (2.22 as Debian packages it) and Gradle have no property for
# their reports directory.
run_copy() {
	: > "$f.start" || exec "$@"
	"$@"
	s=$?
	set -f
	# shellcheck disable=SC2086 # $P is the host's own list of find operands
	find . -name .git -prune -o \( $P \) -type f -newer "$f.start" -exec sh -c \
		'n=0; for x do n=$((n+1)); cp -- "$x" "$0.$$.$n.xml" || exit 1; done' "$f" {} + \
		2>/dev/null
	rm -f "$f.start"
	exit $s
}
GRADLE_XML="-path */build/test-results/*/TEST-*.xml"
case $n in
go)
	[ "${1:-}" = test ] || exec "$real" "$@"
	shift
	for a do case $a in -c|-list|-list=*|-bench|-bench=*) exec "$real" test "$@";; esac; done
	k=0
	for a do
		[ $k = 0 ] && set --
		k=1
		case $a in -failfast|-failfast=*|--failfast|-json|--json) continue;; esac
		set -- "$@" "$a"
	done
	tee_run 1 "$f.gojson" "$real" test -json "$@"
	;;
cargo)
	[ "${1:-}" = test ] || exec "$real" "$@"
	shift
	k=0
	for a do
		[ $k = 0 ] && set --
		k=1
		[ "$a" = --no-fail-fast ] && continue
		set -- "$@" "$a"
	done
	tee_run 2 "$f.cargo" "$real" test --no-fail-fast "$@"
	;;
ctest)
	k=0
	skip=0
	for a do
		[ $k = 0 ] && set --
		k=1
		if [ $skip = 1 ]; then skip=0; continue; fi
		case $a in
		--stop-on-failure|--output-junit=*) continue;;
		--output-junit) skip=1; continue;;
		esac
		set -- "$@" "$a"
	done
	exec "$real" --output-junit "$f.xml" "$@"
	;;
mvn)
	k=0
	for a do
		[ $k = 0 ] && set --
		k=1
		case $a in -ff|--fail-fast) continue;; esac
		set -- "$@" "$a"
	done
	# Surefire's TEST-*.xml go to target/surefire-reports in the tree.
	P="-path */surefire-reports/TEST-*.xml -o -path */failsafe-reports/TEST-*.xml"
	run_copy "$real" -fae -Dsurefire.skipAfterFailureCount=0 "$@"
	;;
gradle)
	k=0
	for a do
		[ $k = 0 ] && set --
		k=1
		[ "$a" = --fail-fast ] && continue
		set -- "$@" "$a"
	done
	P=$GRADLE_XML
	run_copy "$real" --continue "$@"
	;;
java)
	# A repository's ./gradlew bypasses the gradle shim, but starts java through PATH (when
	# JAVA_HOME is unset, as in the sandbox images) with Gradle's wrapper: its arguments
	# after the wrapper's main class (or -jar gradle-wrapper.jar) are Gradle's.
	w=
	p=
	for a do
		case $a in org.gradle.wrapper.GradleWrapperMain) w=main;; esac
		[ "$p" = -jar ] && [ -z "$w" ] && case $a in */gradle-wrapper.jar|gradle-wrapper.jar) w=jar;; esac
		p=$a
	done
	[ -n "$w" ] || exec "$real" "$@"
	k=0
	seen=0
	p=
	for a do
		[ $k = 0 ] && set --
		k=1
		if [ $seen = 1 ]; then
			[ "$a" = --fail-fast ] || set -- "$@" "$a"
			continue
		fi
		set -- "$@" "$a"
		case $w:$p:$a in
		main:*:org.gradle.wrapper.GradleWrapperMain|jar:-jar:*gradle-wrapper.jar)
			seen=1
			set -- "$@" --continue
			;;
		esac
		p=$a
	done
	P=$GRADLE_XML
	run_copy "$real" "$@"
	;;
python|python3|python3.*)
	if [ "${1:-}" = -m ] && [ "${2:-}" = unittest ]; then
		shift 2
		AP_UNITTEST_XML=$f.xml exec "$real" -c \
			"import runpy; runpy.run_path('$me/ap_unittest.py', run_name='__main__')" "$@"
	fi
	if [ "${1:-}" = -m ] && [ "${2:-}" = tox ]; then
		shift 2
		AP_TOX_SHIMS=$me AP_TOX_REAL='' AP_TOX_OUT=$f exec "$real" -c \
			"import runpy; runpy.run_path('$me/ap_tox.py', run_name='__main__')" "$@"
	fi
	exec "$real" "$@"
	;;
tox)
	# tox is a Python script: run it through the host's starter (ap_tox.py) with the
	# interpreter its first line names; anything else runs as it is.
	l=
	IFS= read -r l < "$real" 2>/dev/null
	i=${l#\#!}
	[ "$i" != "$l" ] || exec "$real" "$@"
	case $i in /usr/bin/env\ *) i=${i#/usr/bin/env }; esac
	case $i in
	*[!A-Za-z0-9/._-]*|*/|"") exec "$real" "$@";;
	python|python3|python3.*|*/python|*/python3|*/python3.*) ;;
	*) exec "$real" "$@";;
	esac
	AP_TOX_SHIMS=$me AP_TOX_REAL=$real AP_TOX_OUT=$f exec "$i" -c \
		"import runpy; runpy.run_path('$me/ap_tox.py', run_name='__main__')" "$@"
	;;
node|nodejs)
	case ${1:-} in
	*/jest|*/jest/bin/jest.js|*/jest-cli/bin/jest.js)
		s=$1
		shift
		k=0
		for a do
			[ $k = 0 ] && set --
			k=1
			case $a in --bail|--bail=*|-b|--json|--outputFile=*) continue;; esac
			set -- "$@" "$a"
		done
		exec "$real" "$s" --json "--outputFile=$f.jestjson" "$@"
		;;
	*/vitest|*/vitest.mjs)
		# vitest's JSON reporter writes jest's format; its console reporter is kept (the
		# default one unless the command names its own). --bail N goes, and a user's
		# --outputFile (one value for every reporter, which cannot mix with ours).
		s=$1
		shift
		case ${1:-} in bench|list|init) exec "$real" "$s" "$@";; esac
		k=0
		skip=0
		rep=0
		for a do
			[ $k = 0 ] && set --
			k=1
			if [ $skip != 0 ]; then
				t=$skip
				skip=0
				[ $t = 2 ] && continue
				case $a in [0-9]*) continue;; esac
			fi
			case $a in
			--bail)
				skip=1
				continue
				;;
			--outputFile)
				skip=2
				continue
				;;
			--bail=*|--outputFile=*|--outputFile.*) continue;;
			--reporter|--reporter=*) rep=1;;
			esac
			set -- "$@" "$a"
		done
		[ $rep = 1 ] || set -- "$@" --reporter=default
		exec "$real" "$s" "$@" --reporter=json "--outputFile.json=$f.vitestjson"
		;;
	*/mocha|*/_mocha|*/mocha/bin/mocha.js|*/mocha/bin/_mocha)
		s=$1
		shift
		k=0
		for a do
			[ $k = 0 ] && set --
			k=1
			case $a in --bail|-b) continue;; esac
			set -- "$@" "$a"
		done
		exec "$real" "$s" "$@" --reporter xunit --reporter-option "output=$f.xml"
		;;
	esac
	exec "$real" "$@"
	;;
esac
exec "$real" "$@"
