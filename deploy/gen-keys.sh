#!/usr/bin/env bash
# Generates CURVE key pairs for an orchestrator, the given regions, one CLI user
# and one CLI admin, and the allowlist the orchestrator admits (the WAN needs no
# keys from here: each launch of workers gets a key pair of its own).
#   deploy/gen-keys.sh KEYDIR eu-west us-east ap-south
# Writes KEYDIR/<name>.key (secret, 0600), KEYDIR/<name>.pub, KEYDIR/allowed/*.pub and
# KEYDIR/allowed/roles.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 KEYDIR REGION [REGION...]" >&2; exit 2; }
keydir=$1; shift
LONGHAUL=${LONGHAUL:-$(dirname "$0")/../build/bin/longhaul}
[ -x "$LONGHAUL" ] || { echo "gen-keys: $LONGHAUL not built (run deploy/test.sh or set LONGHAUL=)" >&2; exit 1; }
mkdir -p "$keydir/allowed"
# Roles (allowed/roles): "user" submits jobs and cancels its own; "admin" may also
# cancel anyone's and remove regions; each region's key is the agent of that
# region only, so no key can register (and take over) another's region.
printf 'user user\nadmin admin\n' > "$keydir/allowed/roles"
for name in orchestrator user admin "$@"; do
  if [ ! -e "$keydir/$name.key" ]; then "$LONGHAUL" keys gen --dir "$keydir" --name "$name" >/dev/null; fi
  [ "$name" = orchestrator ] || cp "$keydir/$name.pub" "$keydir/allowed/$name.pub"
  case "$name" in orchestrator|user|admin) ;; *) echo "$name agent $name" >> "$keydir/allowed/roles" ;; esac
done
echo "keys in $keydir; allowlist $keydir/allowed ($(ls "$keydir/allowed" | wc -l) keys)"
