#!/bin/sh
# Roles and databases of the compose deployment. The postgres image runs this once, when it
# initialises an empty volume (/docker-entrypoint-initdb.d). Passwords come from the secret files
# (read by psql itself, so they appear in no command line, and quoted by psql), never from this file.
#   synctide_owner  owns the synctide database and its schema; applies migrations (npm run migrate)
#   synctide_app    the API and workers: connect, and SELECT/INSERT/UPDATE/DELETE on the tables
#                   (and the sequences they use) that synctide_owner creates; no DDL
#   temporal        owns the temporal and temporal_visibility databases and nothing else
set -eu

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres <<'SQL'
\set owner_password `cat /run/secrets/synctide_owner_password`
\set app_password `cat /run/secrets/synctide_app_password`
\set temporal_password `cat /run/secrets/temporal_db_password`
create role synctide_owner login password :'owner_password';
create role synctide_app login password :'app_password';
create role temporal login password :'temporal_password';

create database synctide owner synctide_owner;
create database temporal owner temporal;
create database temporal_visibility owner temporal;
revoke all on database synctide, temporal, temporal_visibility from public;
grant connect on database synctide to synctide_app;

\connect synctide
-- public belongs to the database owner (Postgres 15+); nobody else may create objects in it.
revoke all on schema public from public;
grant usage on schema public to synctide_app;
alter default privileges for role synctide_owner in schema public
  grant select, insert, update, delete on tables to synctide_app;
alter default privileges for role synctide_owner in schema public
  grant usage, select, update on sequences to synctide_app;
SQL
