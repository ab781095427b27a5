{# Connection-temporary staging tables, addressed by name. SQLite keeps temp tables
   until the connection closes, so each load drops what an earlier one left. #}
-- statement: raw
CREATE TEMP TABLE dimlog_raw (
{% for c in key_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
{% for c in attr_defs %}
    {{ c.name }} {{ c.target_type }},
{% endfor %}
{% if tiebreak %}
    dimlog_tiebreak {{ tiebreak.target_type }},
{% endif %}
    valid_from TEXT    NOT NULL,
    is_deleted BOOLEAN NOT NULL,
    row_hash   BLOB
)
-- statement: analyze
{# Not needed on this engine: SQLite's planner picks the staging indexes without statistics. #}
-- statement: drop
DROP TABLE IF EXISTS temp.dimlog_raw;
DROP TABLE IF EXISTS temp.dimlog_stage;
DROP TABLE IF EXISTS temp.dimlog_changes;
DROP TABLE IF EXISTS temp.dimlog_touched;
DROP TABLE IF EXISTS temp.dimlog_source_keys;
DROP TABLE IF EXISTS temp.dimlog_missing;
DROP TABLE IF EXISTS temp.dimlog_unseen;
DROP TABLE IF EXISTS temp.dimlog_rehashed;
DROP TABLE IF EXISTS temp.dimlog_stale;
DROP TABLE IF EXISTS temp.dimlog_restored;
-- statement: drop_raw
DROP TABLE IF EXISTS temp.dimlog_raw
