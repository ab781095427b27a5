{# The version log and the dimension of one config. #}
-- statement: log
CREATE TABLE IF NOT EXISTS {{ log }} (
    log_id     bigint PRIMARY KEY,
    {{ sk }} bigint,
{% for c in key_defs %}
    {{ c.name }} {{ c.target_type }} NOT NULL,
{% endfor %}
{% for c in attr_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
    valid_from timestamptz NOT NULL,
    is_deleted boolean     NOT NULL,
    row_hash   bytea,
    load_id    bigint      NOT NULL,
    loaded_at  timestamptz NOT NULL
)
-- statement: log_index
CREATE INDEX IF NOT EXISTS {{ log_index }} ON {{ log }} ({{ keys|cols }}, valid_from, log_id)
-- statement: log_load_index
{# BRIN: the log is append-only and load ids only grow, so block ranges summarise
   load_id well ("what changed since load N"), and the index costs almost nothing. #}
CREATE INDEX IF NOT EXISTS {{ log_load_index }} ON {{ log }} USING brin (load_id)
-- statement: dimension
CREATE TABLE IF NOT EXISTS {{ dim }} (
    {{ sk }} bigint NOT NULL,
{% for c in key_defs %}
    {{ c.name }} {{ c.target_type }} NOT NULL,
{% endfor %}
{% for c in attr_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
{% for c in current_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz NOT NULL,
    is_current boolean     NOT NULL,
    row_hash   bytea       NOT NULL,
    load_id    bigint      NOT NULL,
    CONSTRAINT {{ dim_pk }} PRIMARY KEY ({{ sk }})
) WITH (fillfactor = 90)
{# Fillfactor 90: every load closes versions in place (a new valid_to), and room on the
   page lets PostgreSQL keep that update on the page without touching the indexes. #}
{# Unique: two versions of a key never share a valid_from, so a rebuild that produced
   them fails loudly instead of writing an overlap. It also finds a key's current row
   (its last version), so no separate current-row index is kept. #}
-- statement: distribute_log
{# Not needed on this engine: the log is one table (see sql/citus/tables.sql). #}
-- statement: distribute_dimension
{# Not needed on this engine: the dimension is one table. #}
-- statement: add_key_hash
{# Not needed on this engine: a key is not distributed by its hash (see sql/citus/tables.sql). #}
-- statement: dimension_index
CREATE UNIQUE INDEX IF NOT EXISTS {{ dim_index }} ON {{ dim }} ({{ keys|cols }}, valid_from)
-- statement: add_log_column
ALTER TABLE {{ log }} ADD COLUMN {{ column.name }} {{ column.target_type }}
-- statement: dimension_update
UPDATE dimlog_dimensions
SET tracked_columns = $1, type1_columns = $2, column_types = $3, hash_version = $4, updated_at = $5
WHERE dimension = $6
-- statement: drop_index
DROP INDEX IF EXISTS {{ index }}
-- statement: primary_key_name
SELECT conname::text FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'p'
-- statement: drop_primary_key
ALTER TABLE {{ table }} DROP CONSTRAINT {{ name }}
-- statement: add_primary_key
ALTER TABLE {{ table }} ADD CONSTRAINT {{ name }} PRIMARY KEY ({{ column }})
{# A first load's COPY straight into the log leaves out the two columns that are the
   same on every row: the server fills them from these defaults instead of parsing a
   timestamp a million times. Both values are formatted by dimlog from typed values
   (an integer, a fixed-width UTC timestamp), never taken from input; the defaults are
   dropped again in the same transaction. #}
-- statement: log_load_defaults
ALTER TABLE {{ log }} ALTER COLUMN load_id SET DEFAULT {{ load_id }}, ALTER COLUMN loaded_at SET DEFAULT '{{ loaded_at }}'::timestamptz
-- statement: log_drop_load_defaults
ALTER TABLE {{ log }} ALTER COLUMN load_id DROP DEFAULT, ALTER COLUMN loaded_at DROP DEFAULT
-- statement: analyze_log
ANALYZE {{ log }} ({{ keys|cols }}, valid_from)
-- statement: analyze_dimension
ANALYZE {{ dim }} ({{ keys|cols }}, valid_from, is_current)
{# Aligning the dimension's columns with what dimlog writes, before a rebuild in place:
   the dimension's columns (name, type), the types of the columns dimlog writes besides
   the key and attributes, adding, retyping and dropping one column, and the views that
   use one (named in a refusal rather than dropped). #}
-- statement: dimension_columns
SELECT attname::text, format_type(atttypid, atttypmod), '0' FROM pg_attribute
WHERE attrelid = to_regclass('{{ dim }}') AND attnum > 0 AND NOT attisdropped ORDER BY attnum
-- statement: own_types
SELECT 'bigint', 'timestamptz', 'boolean', 'bytea'
-- statement: column_retyped
SELECT (atttypid <> to_regtype($2))::text FROM pg_attribute
WHERE attrelid = to_regclass('{{ dim }}') AND attname = $1 AND NOT attisdropped
-- statement: column_views
SELECT DISTINCT dimlog_v.oid::regclass::text
FROM pg_depend dimlog_p
JOIN pg_rewrite dimlog_r ON dimlog_r.oid = dimlog_p.objid
JOIN pg_class dimlog_v ON dimlog_v.oid = dimlog_r.ev_class
JOIN pg_attribute dimlog_a ON dimlog_a.attrelid = dimlog_p.refobjid AND dimlog_a.attnum = dimlog_p.refobjsubid
WHERE dimlog_p.classid = 'pg_rewrite'::regclass AND dimlog_p.refobjid = to_regclass('{{ dim }}')
  AND dimlog_a.attname = $1 AND dimlog_v.oid <> to_regclass('{{ dim }}')
ORDER BY 1
-- statement: add_dimension_column
ALTER TABLE {{ dim }} ADD COLUMN {{ column.name }} {{ column.target_type }}
-- statement: retype_dimension_column
ALTER TABLE {{ dim }} ALTER COLUMN {{ column.name }} TYPE {{ column.target_type }} USING {{ column.name }}::{{ column.target_type }}
{# For the message of a retyped source column: the migration of the log's column. #}
-- statement: retype_log_column
ALTER TABLE {{ log }} ALTER COLUMN {{ column }} TYPE {{ new_type }} USING {{ column }}::{{ new_type }};
-- statement: drop_dimension_column
ALTER TABLE {{ dim }} DROP COLUMN {{ column.name }}
-- statement: set_not_null
ALTER TABLE {{ dim }} ALTER COLUMN {{ column.name }} SET NOT NULL
-- statement: dimension_index_exists
SELECT dimlog_i.relname::text FROM pg_index dimlog_x JOIN pg_class dimlog_i ON dimlog_i.oid = dimlog_x.indexrelid
WHERE dimlog_x.indrelid = to_regclass('{{ dim }}') AND '"' || replace(dimlog_i.relname, '"', '""') || '"' = '{{ dim_index }}'
{# Foreign keys of other tables to the dimension: a first load keeps its primary key. #}
-- statement: referencing_keys
SELECT count(*)::text FROM pg_constraint WHERE contype = 'f' AND confrelid = to_regclass($1)
{# Whether a table exists, and which other table of its schema holds one of the
   indexes dimlog names after it (a table renamed away keeps them). #}
{# The newest log id the log holds: a log cut short or emptied holds fewer than dimlog
   appended (dimlog_dimensions.next_log_id - 1). Read through the primary key. #}
-- statement: log_last_id
SELECT COALESCE(max(log_id), 0)::text FROM {{ log }}
{# The schemas holding a table of this name, for a registered table the session's
   search_path (or the configured schema) does not find. #}
-- statement: tables_named
SELECT dimlog_n.nspname::text FROM pg_class dimlog_c JOIN pg_namespace dimlog_n ON dimlog_n.oid = dimlog_c.relnamespace
WHERE dimlog_c.relname = $1 AND dimlog_c.relkind IN ('r', 'p') ORDER BY 1
-- statement: search_path
SELECT current_setting('search_path')
{# The greatest surrogate key the dimension holds (its primary key). #}
-- statement: dimension_last_sk
SELECT COALESCE(max({{ sk }}), 0)::text FROM {{ dim }}
{# The greatest surrogate key the log gave (a scan: only when the dimension disagrees). #}
-- statement: log_last_sk
SELECT COALESCE(max({{ sk }}), 0)::text FROM {{ log }}
-- statement: log_row_count
SELECT count(*)::text FROM {{ log }}
{# Whether a table holds a row (one of a config's that no dimension is recorded with:
   dimlog would take its rows for its own). #}
-- statement: table_has_rows
SELECT count(*)::text FROM (SELECT 1 FROM {{ table }} LIMIT 1) dimlog_any
-- statement: table_exists
SELECT (to_regclass('{{ table }}') IS NOT NULL)::int::text
-- statement: index_owner
SELECT dimlog_i.relname::text, dimlog_t.oid::regclass::text
FROM pg_class dimlog_i
JOIN pg_index dimlog_x ON dimlog_x.indexrelid = dimlog_i.oid
JOIN pg_class dimlog_t ON dimlog_t.oid = dimlog_x.indrelid
WHERE dimlog_i.relname IN ({% for n in indexes %}'{{ n }}'{{ ", " if not loop.last }}{% endfor %})
  AND dimlog_i.relnamespace = {% if schema %}to_regnamespace('{{ schema }}'){% else %}current_schema()::regnamespace{% endif %}

ORDER BY 1 LIMIT 1
{# Whether a table has an index of this name: `init` creates an index only when it is
   missing, because CREATE INDEX IF NOT EXISTS locks the table first (SHARE) and would
   wait for any transaction writing it, such as a run of another dimension. #}
-- statement: index_exists
SELECT count(*)::text FROM pg_index dimlog_x JOIN pg_class dimlog_i ON dimlog_i.oid = dimlog_x.indexrelid
WHERE dimlog_x.indrelid = to_regclass('{{ table }}') AND '"' || replace(dimlog_i.relname, '"', '""') || '"' = '{{ index }}'
{# `dimlog distribute`, asked on a Citus coordinator alone (sql/citus/tables.sql answers
   the first and the last; here: nothing is distributed). #}
-- statement: distributed_tables
SELECT '0', '0'
-- statement: shard_count
SELECT '1'
{# Foreign keys from or to the log ($1) or the dimension ($2): "name (table → table)". #}
-- statement: foreign_keys
SELECT conname::text, '(' || conrelid::regclass::text || ' -> ' || confrelid::regclass::text || ')'
FROM pg_constraint
WHERE contype = 'f' AND (conrelid IN (to_regclass($1), to_regclass($2)) OR confrelid IN (to_regclass($1), to_regclass($2)))
ORDER BY 1
{# Unique indexes of the log ($1) or the dimension ($2), primary keys aside (dimlog makes
   them again with the key), that do not hold the key column ($3). #}
-- statement: unique_without_key
SELECT dimlog_i.indexrelid::regclass::text
FROM pg_index dimlog_i
WHERE dimlog_i.indrelid IN (to_regclass($1), to_regclass($2)) AND dimlog_i.indisunique AND NOT dimlog_i.indisprimary
  AND NOT EXISTS (SELECT 1 FROM pg_attribute dimlog_a
                  WHERE dimlog_a.attrelid = dimlog_i.indrelid AND dimlog_a.attname = $3 AND dimlog_a.attnum = ANY (dimlog_i.indkey))
ORDER BY 1
