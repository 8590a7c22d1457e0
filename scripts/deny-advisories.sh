#!/bin/sh
# cargo deny's advisories check (RustSec: a known vulnerability in a locked crate) without
# github.com, which this project's machines cannot reach. deny/advisory-db/ holds the RustSec
# advisories of every crate named in Cargo.lock and fuzz/Cargo.lock, copied from a full
# checkout of https://github.com/rustsec/advisory-db (CC0-1.0, deny/advisory-db/LICENSE.txt)
# at the commit and date in deny/advisory-db/SNAPSHOT, with the names it covered in
# deny/advisory-db/COVERED.
#
#   scripts/deny-advisories.sh                    check: every locked crate is covered, the
#                                                 copy is read (a planted advisory must fail
#                                                 the check), then `cargo deny check advisories`
#   scripts/deny-advisories.sh refresh CHECKOUT   copy the advisories of the locked crates
#                                                 from a full advisory-db checkout
#
# Where github.com is reachable, `cargo deny check advisories` with the default database
# is the better check: this copy is only as new as its SNAPSHOT.
set -eu
cd "$(dirname "$0")/.."
SUB=deny/advisory-db
locked() { sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.lock fuzz/Cargo.lock | sort -u; }

if [ "${1:-}" = refresh ]; then
    SRC=${2:?usage: $0 refresh ADVISORY_DB_CHECKOUT}
    [ -d "$SRC/crates" ] || { echo "$0: no crates/ in $SRC: not an advisory-db checkout" >&2; exit 2; }
    rm -rf "$SUB"
    mkdir -p "$SUB/crates"
    cp "$SRC/LICENSE.txt" "$SUB/"
    for c in $(locked); do
        if [ -d "$SRC/crates/$c" ]; then cp -r "$SRC/crates/$c" "$SUB/crates/"; fi
    done
    locked > "$SUB/COVERED"
    git -C "$SRC" log -1 --format='%H %cI' > "$SUB/SNAPSHOT"
    echo "copied $(find "$SUB/crates" -name '*.md' | wc -l) advisories of $(wc -l < "$SUB/COVERED") crates, snapshot $(cat "$SUB/SNAPSHOT")"
    exit 0
fi

# Every crate the lock files name must have been looked up in the snapshot: a crate
# added since the last refresh has no directory here whether or not it has advisories.
missing=$(locked | comm -23 - "$SUB/COVERED")
if [ -n "$missing" ]; then
    echo "$0: crates locked but not in the advisories snapshot (run: $0 refresh CHECKOUT):" >&2
    echo "$missing" >&2
    exit 1
fi

# cargo deny opens its database as a git repository (it reads HEAD's date) under db-path,
# in a directory named for the default URL: build one from the copy, dated as the snapshot.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
DB=$T/db/advisory-db-3157b0e258782691
mkdir -p "$T/db"
cp -r "$SUB" "$DB"
date=$(cut -d' ' -f2 "$SUB/SNAPSHOT")
msg="advisory-db $(cut -d' ' -f1 "$SUB/SNAPSHOT")"
(
    cd "$DB"
    git init -q
    git add -A
    GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date git -c user.name=snapshot -c user.email=snapshot@invalid \
        commit -q -m "$msg"
)
cat > "$T/deny.toml" <<TOML
[advisories]
db-path = "$T/db"
yanked = "warn"
TOML
check() { cargo deny --offline --config "$T/deny.toml" check advisories; }

# The copy must be read: an advisory planted for a locked crate at every version fails it.
mkdir -p "$DB/crates/anyhow"
cat > "$DB/crates/anyhow/RUSTSEC-9999-0001.md" <<'ADV'
```toml
[advisory]
id = "RUSTSEC-9999-0001"
package = "anyhow"
date = "2026-01-01"
url = "https://example.invalid/planted"

[versions]
patched = []
```

# Planted by scripts/deny-advisories.sh

The check must fail on this.
ADV
(cd "$DB" && git add -A && git -c user.name=snapshot -c user.email=snapshot@invalid commit -q -m planted)
if check >"$T/planted.log" 2>&1; then
    echo "$0: a planted advisory did not fail the check: the snapshot is not read" >&2
    cat "$T/planted.log" >&2
    exit 1
fi
grep -q RUSTSEC-9999-0001 "$T/planted.log" || { cat "$T/planted.log" >&2; echo "$0: the planted check failed for another reason" >&2; exit 1; }
(cd "$DB" && git reset -q --hard HEAD~1)

echo "advisories: snapshot $(cat "$SUB/SNAPSHOT"), $(find "$SUB/crates" -name '*.md' | wc -l) advisories of the locked crates"
check
