#!/bin/sh
# gen-env.sh TABLE < cadre-env.7.in > cadre-env.7
#
# Writes cadre-env(7) with its list of CADRE_* tunables generated from TABLE
# (runtime/runtime_config_table.h, lines "X(ID, TYPE, "default", "help")").
# The line ".\" @CADRE_TUNABLES@" of the input is replaced by an mdoc tag list;
# every other line is copied. Fails on a table line it cannot parse, so that a
# tunable never goes missing from the page without a build error.
set -e
if [ $# -ne 1 ] || [ ! -r "$1" ]; then
    echo "usage: gen-env.sh TABLE < cadre-env.7.in > cadre-env.7 (cannot read '${1-}')" >&2
    exit 2
fi

awk -v table="$1" '
function fail(msg) {
    printf "gen-env.sh: %s\n", msg > "/dev/stderr"
    failed = 1
    exit 1
}
# Reads a C string literal starting at s[pos] (the opening quote); returns its
# value with \" and \\ undone and leaves strend at the index after the quote.
function cstring(s, pos,    out, c) {
    if (substr(s, pos, 1) != "\"")
        return "\001"
    out = ""
    for (pos++; pos <= length(s); pos++) {
        c = substr(s, pos, 1)
        if (c == "\\") {
            pos++
            out = out substr(s, pos, 1)
        } else if (c == "\"") {
            strend = pos + 1
            return out
        } else {
            out = out c
        }
    }
    return "\001"
}
function skipsp(s, pos) {
    while (substr(s, pos, 1) == " " || substr(s, pos, 1) == "\t")
        pos++
    return pos
}
# Text for an mdoc text line: backslashes escaped, no leading dot or quote.
function roff(s) {
    gsub(/\\/, "\\e", s)
    if (s ~ /^[.\047]/)
        s = "\\&" s
    return s
}
# A default value as one quoted macro argument, minus signs kept as such.
function literal(s) {
    gsub(/\\/, "\\e", s)
    gsub(/"/, "\\(dq", s)
    gsub(/-/, "\\-", s)
    return "\"" s "\""
}
function entry(line,    rest, id, type, def, help, pos, kind) {
    if (!match(line, /^X\([ \t]*[A-Z0-9_]+[ \t]*,[ \t]*[A-Z]+[ \t]*,[ \t]*/))
        fail("cannot parse table entry: " line)
    rest = substr(line, 3, RLENGTH - 2)
    gsub(/[ \t]/, "", rest)
    split(rest, f, ",")
    id = f[1]
    type = f[2]
    pos = RLENGTH + 1
    def = cstring(line, pos)
    if (def == "\001")
        fail("default of " id " is not a string literal: " line)
    pos = skipsp(line, strend)
    if (substr(line, pos, 1) != ",")
        fail("expected a comma after the default of " id ": " line)
    help = cstring(line, skipsp(line, pos + 1))
    if (help == "\001")
        fail("help of " id " is not a string literal: " line)
    pos = skipsp(line, strend)
    if (substr(line, pos, 1) != ")")
        fail("expected ) after the help of " id ": " line)

    if (type == "STR") kind = "string"
    else if (type == "INT") kind = "integer"
    else if (type == "DBL") kind = "number"
    else if (type == "BOOL") kind = "boolean"
    else fail("unknown type " type " of " id)

    help = toupper(substr(help, 1, 1)) substr(help, 2)
    if (help !~ /[.!?]$/)
        help = help "."
    print ".It Ev CADRE_" id " Pq " kind
    print roff(help)
    if (def == "") {
        print "Default: empty."
    } else {
        print "Default:"
        print ".Ql " literal(def) " ."
    }
    n++
}
function tunables(    line, joined, rc) {
    n = 0
    print ".Bl -tag -width Ds"
    while ((rc = getline line < table) > 0) {
        if (line !~ /^X\(/)
            continue
        joined = line
        # An entry may continue over several lines until its closing ")".
        while (joined !~ /\)[ \t]*$/ && (rc = getline line < table) > 0)
            joined = joined " " line
        entry(joined)
    }
    if (rc < 0)
        fail("cannot read " table)
    close(table)
    if (n == 0)
        fail("no X(...) entries in " table)
    print ".El"
}
$0 == ".\\\" @CADRE_TUNABLES@" {
    tunables()
    markers++
    next
}
{ print }
END {
    if (failed)
        exit 1
    if (markers != 1)
        fail("expected exactly one line .\\\" @CADRE_TUNABLES@ in the input, found " markers + 0)
}
'
