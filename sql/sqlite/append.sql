{# Append the classified changes to the log. Surrogate keys and log ids come from a
   block reserved in dimlog_dimensions (bound values), loaded_at is bound too. #}
-- statement: reserve
SELECT next_surrogate_key, next_log_id FROM dimlog_dimensions WHERE dimension = ?1
-- statement: append
INSERT INTO {{ log }} (log_id, {{ sk }}, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}, valid_from, is_deleted, row_hash, load_id, loaded_at)
SELECT ?1 + ROW_NUMBER() OVER dimlog_w - 1,
       CASE dimlog_change_kind
           WHEN 'version' THEN ?2 + SUM(CASE WHEN dimlog_change_kind = 'version' THEN 1 ELSE 0 END) OVER dimlog_w - 1
           WHEN 'correction' THEN dimlog_p_sk
       END,
       {{ keys|cols }},
{% for a in attrs %}
       CASE WHEN dimlog_change_kind = 'tombstone' THEN NULL ELSE {{ a }} END,
{% endfor %}
       valid_from,
       dimlog_change_kind = 'tombstone',
       CASE WHEN dimlog_change_kind = 'tombstone' THEN NULL ELSE row_hash END,
       ?3,
       ?4
FROM dimlog_changes
WINDOW dimlog_w AS (ORDER BY {{ keys|cols }}, valid_from ROWS UNBOUNDED PRECEDING)
ORDER BY {{ keys|cols }}, valid_from
{# A first load (empty log, one staged row per key) appends the staged rows as they
   are, numbered in the same order as `append`, without classifying them first. #}
-- statement: append_first
{# The rowid by a name no staged column takes (a column named `rowid` hides it). #}
{% set names = (keys + attrs)|join(",")|lower %}
{% if '"rowid"' not in names %}{% set rid = "rowid" %}{% elif '"oid"' not in names %}{% set rid = "oid" %}{% elif '"_rowid_"' not in names %}{% set rid = "_rowid_" %}{% else %}{% set rid = none %}{% endif %}
{% set ordered = not tombstones and rid %}
{% if ordered %}
DROP TABLE IF EXISTS temp.dimlog_order;
CREATE TEMP TABLE dimlog_order AS
SELECT (SELECT count(*) FROM dimlog_stage) = (SELECT coalesce(max({{ rid }}) - min({{ rid }}) + 1, 0) FROM dimlog_stage)
       AND NOT EXISTS (
           SELECT 1 FROM dimlog_stage dimlog_a JOIN dimlog_stage dimlog_b ON dimlog_b.{{ rid }} = dimlog_a.{{ rid }} + 1
           WHERE ({{ keys|cols("dimlog_b") }}, dimlog_b.valid_from) <= ({{ keys|cols("dimlog_a") }}, dimlog_a.valid_from)
       ) AS dimlog_in_order,
       (SELECT min({{ rid }}) FROM dimlog_stage) AS dimlog_first;
{% endif %}
INSERT INTO {{ log }} (log_id, {{ sk }}, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}, valid_from, is_deleted, row_hash, load_id, loaded_at)
{% if tombstones %}
SELECT ?1 + ROW_NUMBER() OVER dimlog_w - 1,
       CASE WHEN is_deleted THEN NULL ELSE ?2 + SUM(CASE WHEN is_deleted THEN 0 ELSE 1 END) OVER dimlog_w - 1 END,
       {{ keys|cols }},
{% for a in attrs %}
       CASE WHEN is_deleted THEN NULL ELSE {{ a }} END,
{% endfor %}
       valid_from, is_deleted, CASE WHEN is_deleted THEN NULL ELSE row_hash END, ?3, ?4
FROM dimlog_stage
WINDOW dimlog_w AS (ORDER BY {{ keys|cols }}, valid_from ROWS UNBOUNDED PRECEDING)
ORDER BY {{ keys|cols }}, valid_from
{% else %}
{# Staged rows that arrived in key order (a source read in its key's order, such as a
   table keyed by its INTEGER PRIMARY KEY) are numbered by their place, without the
   sort: each row is checked to follow the one before it, by the same comparison as the
   ORDER BY (both sides of one column, so no affinity applies; keys are never NULL), and
   their rowids to run without a gap. Otherwise the numbering window sorts them. #}
SELECT ?1 + dimlog_n - 1, ?2 + dimlog_n - 1, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}, valid_from, is_deleted, row_hash, ?3, ?4
FROM (SELECT dimlog_s.*, ROW_NUMBER() OVER (ORDER BY {{ keys|cols }}, valid_from) AS dimlog_n FROM dimlog_stage dimlog_s
{# (Inside, so that rows in order never reach the window's sort.) #}
{% if ordered %}
      WHERE NOT (SELECT dimlog_in_order FROM temp.dimlog_order)
{% endif %}
     ) dimlog_numbered
ORDER BY dimlog_n{% if ordered %};
INSERT INTO {{ log }} (log_id, {{ sk }}, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}, valid_from, is_deleted, row_hash, load_id, loaded_at)
SELECT ?1 + dimlog_s.{{ rid }} - dimlog_o.dimlog_first, ?2 + dimlog_s.{{ rid }} - dimlog_o.dimlog_first,
       {{ keys|cols("dimlog_s") }}{% if attrs %}, {{ attrs|cols("dimlog_s") }}{% endif %}, dimlog_s.valid_from, dimlog_s.is_deleted, dimlog_s.row_hash, ?3, ?4
FROM temp.dimlog_order dimlog_o CROSS JOIN dimlog_stage dimlog_s
WHERE dimlog_o.dimlog_in_order
ORDER BY dimlog_s.{{ rid }};
DROP TABLE temp.dimlog_order
{% endif %}
{% endif %}
-- statement: advance
UPDATE dimlog_dimensions
SET next_surrogate_key = next_surrogate_key + ?2, next_log_id = next_log_id + ?3, built_through_load = ?4, updated_at = ?5
WHERE dimension = ?1
-- statement: rehash_append
INSERT INTO {{ log }} (log_id, {{ sk }}, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}{% for c in carried %}, {{ c }}{% endfor %}, valid_from, is_deleted, row_hash, load_id, loaded_at)
SELECT ?1 + ROW_NUMBER() OVER (ORDER BY {{ keys|cols }}) - 1, dimlog_sk, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}{% for c in carried %}, {{ c }}{% endfor %}, valid_from, 0, row_hash, ?2, ?3
FROM dimlog_rehashed
ORDER BY {{ keys|cols }}
{# The earlier versions a load carries over to the new Type 2 column set (`stale` in
   classify.sql), before its classified rows: same surrogate key, valid_from and logged
   values, the new hash. #}
-- statement: stale_append
INSERT INTO {{ log }} (log_id, {{ sk }}, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}{% for c in carried %}, {{ c }}{% endfor %}, valid_from, is_deleted, row_hash, load_id, loaded_at)
SELECT ?1 + dimlog_n - 1, dimlog_sk, {{ keys|cols }}{% if attrs %}, {{ attrs|cols }}{% endif %}{% for c in carried %}, {{ c }}{% endfor %}, valid_from, 0, row_hash, ?2, ?3
FROM dimlog_stale
ORDER BY dimlog_n
-- statement: is_empty
SELECT CASE WHEN EXISTS (SELECT 1 FROM {{ log }}) THEN 0 ELSE 1 END
-- statement: appended_table
{# Not needed on this engine: the rebuild reads the appended rows from the log itself. #}
{# Not needed on this engine: `append` numbers the changes in one statement (see
   sql/citus/append.sql). #}
-- statement: key_offsets
-- statement: append_by_offsets
-- statement: append_kept
