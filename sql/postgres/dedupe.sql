{# One row per key per load (per key and timestamp with history = "all"): the newest,
   ties broken by the tiebreak column, then a delete before a live row (whatever the
   column set), then the greatest row_hash, bytewise. The one
   rule for the window's rows and for the rows of keys reconciliation found unseen. #}
{% macro newest_rows(only_unseen) %}
SELECT DISTINCT ON ({{ keys|cols("dimlog_r") }}{% if history_all %}, dimlog_r.valid_from{% endif %})
       {{ keys|cols("dimlog_r") }}, {% if attrs %}{{ attrs|cols("dimlog_r") }}, {% endif %}dimlog_r.valid_from, dimlog_r.is_deleted, dimlog_r.row_hash
FROM dimlog_raw dimlog_r
{% if only_unseen %}
WHERE EXISTS (SELECT 1 FROM dimlog_unseen dimlog_u WHERE {{ keys|eqs("dimlog_u", "dimlog_r") }})
{% endif %}
ORDER BY {{ keys|cols("dimlog_r") }}, dimlog_r.valid_from DESC{% if tiebreak %}, dimlog_r.dimlog_tiebreak DESC NULLS LAST{% endif %}, dimlog_r.is_deleted DESC, dimlog_r.row_hash DESC
{% endmacro %}
-- statement: dedupe
CREATE TEMP TABLE dimlog_stage AS
{{ newest_rows(false) }}
-- statement: adopt
ALTER TABLE dimlog_raw RENAME TO dimlog_stage
-- statement: count
SELECT count(*)::text FROM dimlog_stage
{# Rows of keys that reconciliation found in the source but not live in the dimension
   and not in this load (`dimlog_unseen`: stamped behind the window, or restored), read
   again from the whole source into a fresh dimlog_raw. #}
-- statement: unseen
INSERT INTO dimlog_stage ({{ keys|cols }}, {% if attrs %}{{ attrs|cols }}, {% endif %}valid_from, is_deleted, row_hash)
{{ newest_rows(true) }}
