{# Session-temporary staging tables, addressed by name so a distributed profile can
   swap in real tables colocated by key. The tables a load fills from the source (raw,
   stage, and reconciliation's source_keys, missing and unseen) live for the session, not
   the transaction: a load reads the source before it opens its transaction (so that the
   transaction never waits idle on a slow source), and each load drops what an earlier one
   in the same session left. #}
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
    valid_from timestamptz NOT NULL,
    is_deleted boolean     NOT NULL,
    row_hash   bytea
)
{# Only the columns the dedupe, classify and rebuild plans join and sort on: statistics
   on the attributes and the hash cost more than the statements they would guide. #}
-- statement: analyze
ANALYZE dimlog_stage ({{ keys|cols }}, valid_from)
-- statement: drop
DROP TABLE IF EXISTS pg_temp.dimlog_raw, pg_temp.dimlog_stage, pg_temp.dimlog_source_keys,
    pg_temp.dimlog_missing, pg_temp.dimlog_unseen, pg_temp.dimlog_key_diff
-- statement: drop_raw
DROP TABLE IF EXISTS pg_temp.dimlog_raw
