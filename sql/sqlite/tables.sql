{# The version log and the dimension of one config. #}
-- statement: log
CREATE TABLE IF NOT EXISTS {{ log }} (
    log_id     INTEGER PRIMARY KEY,
    {{ sk }} INTEGER,
{% for c in key_defs %}
    {{ c.name }} {{ c.target_type }} NOT NULL,
{% endfor %}
{% for c in attr_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
    valid_from TEXT    NOT NULL,
    is_deleted BOOLEAN NOT NULL,
    row_hash   BLOB,
    load_id    INTEGER NOT NULL,
    loaded_at  TEXT    NOT NULL
)
-- statement: log_index
CREATE INDEX IF NOT EXISTS {{ log_index }} ON {{ log }} ({{ keys|cols }}, valid_from, log_id)
-- statement: log_load_index
CREATE INDEX IF NOT EXISTS {{ log_load_index }} ON {{ log }} (load_id)
-- statement: dimension
CREATE TABLE IF NOT EXISTS {{ dim }} (
    {{ sk }} INTEGER PRIMARY KEY,
{% for c in key_defs %}
    {{ c.name }} {{ c.target_type }} NOT NULL,
{% endfor %}
{% for c in attr_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
{% for c in current_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
    valid_from TEXT    NOT NULL,
    valid_to   TEXT    NOT NULL,
    is_current BOOLEAN NOT NULL,
    row_hash   BLOB    NOT NULL,
    load_id    INTEGER NOT NULL
)
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
SET tracked_columns = ?1, type1_columns = ?2, column_types = ?3, hash_version = ?4, updated_at = ?5
WHERE dimension = ?6
-- statement: drop_index
DROP INDEX IF EXISTS {{ index }}
{# Aligning the dimension's columns with what dimlog writes, before a rebuild in place:
   the dimension's columns (name, type), the types of the columns dimlog writes besides
   the key and attributes, adding and dropping one column. #}
-- statement: dimension_columns
SELECT name, type, CAST(pk AS TEXT) FROM pragma_table_info('{{ dim_plain }}') ORDER BY cid
-- statement: own_types
SELECT 'INTEGER', 'TEXT', 'BOOLEAN', 'BLOB'
-- statement: add_dimension_column
ALTER TABLE {{ dim }} ADD COLUMN {{ column.name }} {{ column.target_type }}
-- statement: drop_dimension_column
ALTER TABLE {{ dim }} DROP COLUMN {{ column.name }}
-- statement: dimension_index_exists
SELECT name FROM sqlite_master WHERE type = 'index' AND '"' || replace(name, '"', '""') || '"' = '{{ dim_index }}'
{# What would be lost if the dimension were created again: views that name it, its
   triggers and indexes other than dimlog's, and foreign keys of other tables to it. #}
-- statement: dimension_dependents
SELECT 'view ' || name FROM sqlite_master WHERE type = 'view' AND sql LIKE '%{{ dim_plain }}%'
UNION ALL
SELECT 'trigger ' || name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = '{{ dim_plain }}' COLLATE NOCASE
UNION ALL
SELECT 'index ' || name FROM sqlite_master
WHERE type = 'index' AND tbl_name = '{{ dim_plain }}' COLLATE NOCASE AND sql IS NOT NULL AND '"' || replace(name, '"', '""') || '"' <> '{{ dim_index }}'
UNION ALL
SELECT 'the foreign key of table ' || dimlog_t.name FROM sqlite_master dimlog_t, pragma_foreign_key_list(dimlog_t.name) dimlog_f
WHERE dimlog_t.type = 'table' AND dimlog_f."table" = '{{ dim_plain }}' COLLATE NOCASE
{# Whether a table exists, and which other table holds one of the indexes dimlog names
   after it (a table renamed away keeps them). #}
{# The newest log id the log holds (see the PostgreSQL statement). #}
-- statement: log_last_id
SELECT CAST(COALESCE(max(log_id), 0) AS TEXT) FROM {{ log }}
{# One schema on SQLite: a table is where it is, or nowhere. #}
-- statement: tables_named
SELECT '' WHERE 0 AND ?1 IS NULL
-- statement: search_path
SELECT ''
{# The greatest surrogate key the dimension holds (its primary key). #}
-- statement: dimension_last_sk
SELECT CAST(COALESCE(max({{ sk }}), 0) AS TEXT) FROM {{ dim }}
{# The greatest surrogate key the log gave (a scan: only when the dimension disagrees). #}
-- statement: log_last_sk
SELECT CAST(COALESCE(max({{ sk }}), 0) AS TEXT) FROM {{ log }}
-- statement: log_row_count
SELECT CAST(count(*) AS TEXT) FROM {{ log }}
{# Whether a table holds a row (one of a config's that no dimension is recorded with:
   dimlog would take its rows for its own). #}
-- statement: table_has_rows
SELECT CAST(count(*) AS TEXT) FROM (SELECT 1 FROM {{ table }} LIMIT 1)
-- statement: table_exists
SELECT CAST(count(*) AS TEXT) FROM sqlite_master WHERE type = 'table' AND name = '{{ plain }}' COLLATE NOCASE
-- statement: index_owner
SELECT name, tbl_name FROM sqlite_master
WHERE type = 'index' AND name IN ({% for n in indexes %}'{{ n }}'{{ ", " if not loop.last }}{% endfor %}) COLLATE NOCASE
ORDER BY 1 LIMIT 1
{# Whether a table has an index of this name (`init` creates indexes only when missing). #}
-- statement: index_exists
SELECT CAST(count(*) AS TEXT) FROM sqlite_master
WHERE type = 'index' AND tbl_name = '{{ plain }}' COLLATE NOCASE AND '"' || replace(name, '"', '""') || '"' = '{{ index }}'
-- statement: analyze_log
{# Not needed on this engine: SQLite's planner needs no statistics. #}
-- statement: analyze_dimension
{# Not needed on this engine: SQLite's planner needs no statistics. #}
-- statement: column_views
{# SQLite does not track which views use a column: none is named. #}
SELECT NULL WHERE 0
-- statement: retype_log_column
{# SQLite cannot change a declared column type: no statement; the message says so. #}
