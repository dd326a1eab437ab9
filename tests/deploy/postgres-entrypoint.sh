#!/usr/bin/env bash
# The official postgres image's first-start contract (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB; scram-sha-256
# for every network client) on Debian's PostgreSQL, for the local stand-in image. As the official entrypoint, a
# command `postgres ARGS...` starts the server with those arguments (docker-compose.yml's TLS settings).
set -euo pipefail
: "${POSTGRES_USER:?}" "${POSTGRES_PASSWORD:?}" "${POSTGRES_DB:=$POSTGRES_USER}"
if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
  pwfile=$(mktemp); printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
  # UTF-8 as the official image (its LANG is en_US.utf8); the C locale alone would give SQL_ASCII databases.
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --encoding=UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all 0.0.0.0/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [[ "$POSTGRES_DB" != postgres ]]; then createdb -U "$POSTGRES_USER" "$POSTGRES_DB"; fi
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
if [[ "${1:-}" == postgres ]]; then shift; fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
