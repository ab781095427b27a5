{# The staged rows on Citus: the statistics of the whole table (see analyze_log in
   sql/citus/tables.sql); the rest is PostgreSQL's (sql/postgres/stage.sql). #}
-- statement: analyze
ANALYZE dimlog_stage
