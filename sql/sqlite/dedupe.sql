{# One row per key per load (per key and timestamp with history = "all"): the newest,
   ties broken by the tiebreak column, then a delete before a live row (whatever the
   column set), then the greatest row_hash, bytewise. The one
   rule for the window's rows and for the rows of keys reconciliation found unseen. #}
{% macro newest_rows(only_unseen) %}
SELECT {{ keys|cols("dimlog_x") }}, {% if attrs %}{{ attrs|cols("dimlog_x") }}, {% endif %}dimlog_x.valid_from, dimlog_x.is_deleted, dimlog_x.row_hash
FROM (
    SELECT dimlog_r.*,
           ROW_NUMBER() OVER (
               PARTITION BY {{ keys|cols("dimlog_r") }}{% if history_all %}, dimlog_r.valid_from{% endif %}
               ORDER BY dimlog_r.valid_from DESC{% if tiebreak %}, dimlog_r.dimlog_tiebreak DESC{% endif %}, dimlog_r.is_deleted DESC, dimlog_r.row_hash DESC
           ) AS dimlog_rn
    FROM dimlog_raw dimlog_r
{% if only_unseen %}
    WHERE ({{ keys|cols("dimlog_r") }}) IN (SELECT {{ keys|cols }} FROM dimlog_unseen)
{% endif %}
) dimlog_x
WHERE dimlog_x.dimlog_rn = 1
{% endmacro %}
-- statement: dedupe
CREATE TEMP TABLE dimlog_stage AS
{{ newest_rows(false) }}
-- statement: adopt
ALTER TABLE temp.dimlog_raw RENAME TO dimlog_stage
-- statement: count
SELECT count(*) FROM dimlog_stage
{# Rows of keys that reconciliation found in the source but not live in the dimension
   and not in this load (`dimlog_unseen`: stamped behind the window, or restored), read
   again from the whole source into a fresh dimlog_raw. #}
-- statement: unseen
INSERT INTO dimlog_stage ({{ keys|cols }}, {% if attrs %}{{ attrs|cols }}, {% endif %}valid_from, is_deleted, row_hash)
{{ newest_rows(true) }}
