{# One row per key per load (per key and timestamp with history = "all"): the newest,
   ties broken by the tiebreak column, then by the greatest row_hash, bytewise. #}
-- statement: dedupe
CREATE TEMP TABLE dimlog_stage ON COMMIT DROP AS
SELECT DISTINCT ON ({{ keys|cols }}{% if history_all %}, valid_from{% endif %})
       {{ keys|cols }}, {% if attrs %}{{ attrs|cols }}, {% endif %}valid_from, is_deleted, row_hash
FROM dimlog_raw
ORDER BY {{ keys|cols }}, valid_from DESC{% if tiebreak %}, dimlog_tiebreak DESC NULLS LAST{% endif %}, row_hash DESC, is_deleted DESC
-- statement: adopt
ALTER TABLE dimlog_raw RENAME TO dimlog_stage
-- statement: count
SELECT count(*)::text FROM dimlog_stage
