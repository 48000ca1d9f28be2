#!/bin/sh
# Writes the cdp_run(1) man page from `cdp_run --help`, so that the page and
# the program never disagree:  help2man.sh CDP_RUN VERSION > cdp_run.1
set -e
prog=$1
version=$2
help=$("$prog" --help)
date=$(date -u +%Y-%m-%d)
printf '.TH CDP_RUN 1 "%s" "cdp %s" "User Commands"\n' "$date" "$version"
printf '.SH NAME\ncdp_run \\- train a network with Cyclic Data Parallelism over MPI\n'
printf '.SH SYNOPSIS\n.B mpirun\n\\-np\n.I P\n.B cdp_run\n[\\fIoptions\\fR]\n'
printf '.SH DESCRIPTION\n'
# every line of --help verbatim (no filling), backslashes and leading dots escaped
printf '.nf\n'
printf '%s\n' "$help" | sed -e 's/\\/\\e/g' -e 's/^\./\\\&./' -e 's/^-/\\-/'
printf '.fi\n'
printf '.SH FILES\nThe reference (timeline, numerics, frameworks, file formats, measurements):\n'
printf '.I doc/reference.md\nin the installed documentation directory.\n'
printf '.SH SEE ALSO\n.BR mpirun (1)\n'
