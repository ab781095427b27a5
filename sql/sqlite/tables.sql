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
