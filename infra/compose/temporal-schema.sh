#!/bin/sh
# Temporal's schema job (temporalio/admin-tools), as Temporal's own compose files run it: creates
# or upgrades the schemas of the `temporal` and `temporal_visibility` databases (created, empty and
# owned by the `temporal` role, by postgres-init.sh). Safe to run at every `up`: setup-schema -v 0.0
# and update-schema leave an up-to-date schema as it is. Postgres is waited for, at most 60 tries
# 2 s apart, saying so.
set -eu
SQL_PASSWORD="$(cat /run/secrets/temporal_db_password)"
export SQL_PASSWORD
SCHEMA=/etc/temporal/schema/postgresql/v12
sql() { temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" "$@"; }

tries=0
until sql --db temporal setup-schema -v 0.0; do
  tries=$((tries + 1))
  if [ "$tries" -ge 60 ]; then echo "gave up waiting for Postgres at $POSTGRES_SEEDS:$DB_PORT after $tries tries"; exit 1; fi
  echo "waiting for Postgres at $POSTGRES_SEEDS:$DB_PORT to accept the temporal role (try $tries/60)"
  sleep 2
done
sql --db temporal update-schema -d "$SCHEMA/temporal/versioned"
sql --db temporal_visibility setup-schema -v 0.0
sql --db temporal_visibility update-schema -d "$SCHEMA/visibility/versioned"
echo "Temporal schemas are up to date"
