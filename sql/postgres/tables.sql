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
