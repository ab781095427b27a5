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
-- statement: analyze
ANALYZE dimlog_stage
