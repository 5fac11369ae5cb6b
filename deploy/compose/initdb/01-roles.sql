-- Mneme database bootstrap for the pgvector/pgvector Postgres image.
--
-- The image's entrypoint runs this file once, with psql, as the superuser (POSTGRES_USER), and
-- only when the data directory is empty. It does what needs a superuser and nothing more:
--   * mneme_owner: owns the database and runs the migrations (CREATEROLE so the first
--     migration could create the runtime role; BYPASSRLS so cross-tenant maintenance such as
--     `mneme reembed` can run as the owner; not a superuser);
--   * mneme_app: the runtime role the service connects as. The first migration creates it
--     only if missing (without a password), so it is created here with one; the migration
--     then grants it table privileges and nothing else;
--   * the extensions vector and pg_trgm, which only a superuser may create.
--
-- Passwords come from the container's environment (docker-compose.yml passes
-- MNEME_OWNER_PASSWORD and MNEME_APP_PASSWORD); psql's \getenv needs psql 15 or later.

\set ON_ERROR_STOP on

\getenv owner_password MNEME_OWNER_PASSWORD
\getenv app_password MNEME_APP_PASSWORD

\if :{?owner_password}
\else
DO $$ BEGIN RAISE EXCEPTION 'MNEME_OWNER_PASSWORD is not set in the postgres container'; END $$;
\endif
\if :{?app_password}
\else
DO $$ BEGIN RAISE EXCEPTION 'MNEME_APP_PASSWORD is not set in the postgres container'; END $$;
\endif

CREATE ROLE mneme_owner LOGIN CREATEROLE NOSUPERUSER NOCREATEDB BYPASSRLS
    PASSWORD :'owner_password';
CREATE ROLE mneme_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS
    PASSWORD :'app_password';

CREATE DATABASE mneme OWNER mneme_owner;

\connect mneme
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
