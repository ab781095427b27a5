{# Session-temporary staging tables, addressed by name so a distributed profile can
   swap in real tables colocated by key. #}
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
) ON COMMIT DROP
{# Only the columns the dedupe, classify and rebuild plans join and sort on: statistics
   on the attributes and the hash cost more than the statements they would guide. #}
-- statement: analyze
ANALYZE dimlog_stage ({{ keys|cols }}, valid_from)
-- statement: drop_raw
DROP TABLE IF EXISTS dimlog_raw
