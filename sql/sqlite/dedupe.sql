{# One row per key per load (per key and timestamp with history = "all"): the newest,
   ties broken by the tiebreak column, then by the greatest row_hash, bytewise. #}
-- statement: dedupe
CREATE TEMP TABLE dimlog_stage AS
SELECT {{ keys|cols }}, {% if attrs %}{{ attrs|cols }}, {% endif %}valid_from, is_deleted, row_hash
FROM (
    SELECT dimlog_r.*,
           ROW_NUMBER() OVER (
               PARTITION BY {{ keys|cols("dimlog_r") }}{% if history_all %}, dimlog_r.valid_from{% endif %}
               ORDER BY dimlog_r.valid_from DESC{% if tiebreak %}, dimlog_r.dimlog_tiebreak DESC{% endif %}, dimlog_r.row_hash DESC, dimlog_r.is_deleted DESC
           ) AS dimlog_rn
    FROM dimlog_raw dimlog_r
) dimlog_x
WHERE dimlog_rn = 1
-- statement: adopt
ALTER TABLE temp.dimlog_raw RENAME TO dimlog_stage
-- statement: count
SELECT count(*) FROM dimlog_stage
