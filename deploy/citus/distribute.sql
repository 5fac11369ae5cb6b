-- Distribute Mneme's tables over a Citus cluster, by tenant. Run on the coordinator as a
-- superuser after `mneme migrate`; running it again changes nothing.
--
-- * Every tenant table is hash-distributed by its tenant column and co-located with `tenant`:
--   one tenant's rows of every table live on one shard group, so each request's statements
--   (all filtered by tenant_id) are routed to a single worker, and foreign keys hold there.
--   Primary keys, unique indexes and foreign keys all include the tenant column (the
--   catalogue test tests/db/test_distribution_fit.py keeps it so), which Citus requires.
-- * Row-level-security policies, ENABLE/FORCE and grants are copied to every shard by Citus.
-- * There is no global table that tenant tables join or reference: nothing is a reference
--   table. pgqueuer's job queue (pgqueuer*) and alembic_version stay plain tables on the
--   coordinator: a queue polled with FOR UPDATE SKIP LOCKED and woken by LISTEN/NOTIFY is not
--   a sharding candidate, and Citus serves coordinator-local tables in the same transactions.
--   The vector columns' state (embedding_column, embedding_column_tenant: which model each of
--   memory's vector columns holds, which tenants read the one being filled) stays there too:
--   global, tiny, read whole by each service process and never joined with a tenant table.
DO $$
DECLARE
  tenant_tables CONSTANT text[] := ARRAY[
    -- parents before children: a foreign key can only point at an already distributed table
    'user_account', 'api_key', 'profile', 'thread', 'message', 'thread_summary', 'memory',
    'memory_event', 'memory_posting', 'memory_owner_stats', 'memory_lexeme_stats', 'audit_log',
    'idempotency_record', 'extraction_cursor', 'retention_policy'];
  missing text;
  t text;
BEGIN
  SELECT string_agg(c.relname, ', ') INTO missing
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = 'public' AND c.relkind = 'r'
     AND c.relname <> ALL (tenant_tables || ARRAY['tenant', 'alembic_version',
                                                   'embedding_column', 'embedding_column_tenant'])
     AND c.relname NOT LIKE 'pgqueuer%';
  IF missing IS NOT NULL THEN
    RAISE EXCEPTION 'tables with no distribution decision: % (add them to distribute.sql)', missing;
  END IF;

  IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'tenant'::regclass) THEN
    PERFORM create_distributed_table('tenant', 'id');
  END IF;
  FOREACH t IN ARRAY tenant_tables LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = t::regclass) THEN
      PERFORM create_distributed_table(t, 'tenant_id', colocate_with => 'tenant');
    END IF;
  END LOOP;
END $$;
